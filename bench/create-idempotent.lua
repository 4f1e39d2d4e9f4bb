-- createPet with a fresh Idempotency-Key on every request (wrk -s bench/create-idempotent.lua): every create is a
-- first use, so each one inserts the pet and its record. The keys grow as UUIDv7 keys do; the rest is bench/create.lua.
CREATE_HEADER = "Idempotency-Key"
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "create.lua")
