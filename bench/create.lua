-- createPet (wrk -s bench/create.lua): the same valid body on every request, and a fresh value on every request in a
-- header the server ignores (`X-Bench-Value`; not `X-Request-Id`, which the server reads). bench/create-idempotent.lua
-- and bench/create-idempotent-random.lua load this script with the value in `Idempotency-Key` instead, so a row with
-- keys and the row without make wrk do the same work: wrk shares the machine's two cores with the server, and
-- formatting each request in Lua, instead of sending one prepared request, takes a few per cent of the throughput of
-- the server's creates.
--
-- Before loading it, a script may set CREATE_HEADER (the header's name) and CREATE_VALUES ("random": shaped as
-- UUIDv4, landing anywhere in an index of keys; otherwise they grow as UUIDv7 keys do: one prefix for the run, then a
-- counter of fixed width, so that each sorts after the one before; without its leading zeros "…-10" would sort before
-- "…-9").
wrk.method = "POST"
wrk.body = '{"name":"  Bench Pet  ","categoryId":7,"status":"pending"}'
wrk.headers["Content-Type"] = "application/json"

local header = CREATE_HEADER or "X-Bench-Value"
math.randomseed(os.time())

local prefix = string.format(
  "%08x-%04x-7%03x-%04x-", os.time(), math.random(0, 0xffff), math.random(0, 0xfff), 0x8000 + math.random(0, 0x3fff)
)
local sent = 0

local function growing()
  sent = sent + 1
  return prefix .. string.format("%012x", sent)
end

local function random()
  return string.format(
    "%08x-%04x-4%03x-%04x-%06x%06x",
    math.random(0, 0x7fffffff), math.random(0, 0xffff), math.random(0, 0xfff),
    0x8000 + math.random(0, 0x3fff), math.random(0, 0xffffff), math.random(0, 0xffffff)
  )
end

local value = CREATE_VALUES == "random" and random or growing

request = function()
  wrk.headers[header] = '"' .. value() .. '"'
  return wrk.format()
end
