-- createPet with a fresh Idempotency-Key on every request (wrk -s bench/create-idempotent.lua): every create is a
-- first use, so each one inserts the pet and the record of its answer. The keys grow as UUIDv7 keys do: one prefix
-- for the run, then a counter of fixed width, so that each key sorts after the one before (a counter without its
-- leading zeros would not: "…-10" sorts before "…-9").
wrk.method = "POST"
wrk.body = '{"name":"  Bench Pet  ","categoryId":7,"status":"pending"}'
wrk.headers["Content-Type"] = "application/json"

math.randomseed(os.time())
local prefix = string.format(
  "%08x-%04x-7%03x-%04x-", os.time(), math.random(0, 0xffff), math.random(0, 0xfff), 0x8000 + math.random(0, 0x3fff)
)
local sent = 0

request = function()
  sent = sent + 1
  wrk.headers["Idempotency-Key"] = '"' .. prefix .. string.format("%012x", sent) .. '"'
  return wrk.format()
end
