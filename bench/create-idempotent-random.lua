-- createPet with a fresh, random Idempotency-Key on every request, shaped as a UUIDv4 (wrk -s
-- bench/create-idempotent-random.lua): what most generated clients send; these keys land anywhere in the index of keys.
-- The rest is bench/create.lua.
CREATE_HEADER = "Idempotency-Key"
CREATE_VALUES = "random"
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "create.lua")
