-- createPet with a fresh Idempotency-Key on every request (wrk -s bench/create-idempotent.lua): every create is a
-- first use, so each one inserts the pet and the record of its answer.
wrk.method = "POST"
wrk.body = '{"name":"  Bench Pet  ","categoryId":7,"status":"pending"}'
wrk.headers["Content-Type"] = "application/json"

math.randomseed(os.time())
local prefix = string.format("%x-%x", os.time(), math.random(0, 0x7fffffff))
local sent = 0

request = function()
  sent = sent + 1
  wrk.headers["Idempotency-Key"] = '"' .. prefix .. "-" .. sent .. '"'
  return wrk.format()
end
