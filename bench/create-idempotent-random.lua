-- createPet with a fresh, random Idempotency-Key on every request, shaped as a UUIDv4 (wrk -s
-- bench/create-idempotent-random.lua): what most generated clients send. bench/create-idempotent.lua's keys grow with
-- time (as UUIDv7 keys do); these land anywhere in the index of keys.
wrk.method = "POST"
wrk.body = '{"name":"  Bench Pet  ","categoryId":7,"status":"pending"}'
wrk.headers["Content-Type"] = "application/json"

math.randomseed(os.time())

request = function()
  wrk.headers["Idempotency-Key"] = string.format(
    '"%08x-%04x-4%03x-%04x-%06x%06x"',
    math.random(0, 0x7fffffff), math.random(0, 0xffff), math.random(0, 0xfff),
    0x8000 + math.random(0, 0x3fff), math.random(0, 0xffffff), math.random(0, 0xffffff)
  )
  return wrk.format()
end
