-- createPet as bench/create.lua, with a header that differs on every request (X-Bench-Sequence, which the server
-- ignores), made by a request function as bench/create-idempotent.lua is: the row to set beside that one, so that the
-- two differ only in the Idempotency-Key and not in what wrk does per request.
wrk.method = "POST"
wrk.body = '{"name":"  Bench Pet  ","categoryId":7,"status":"pending"}'
wrk.headers["Content-Type"] = "application/json"

local sent = 0

request = function()
  sent = sent + 1
  wrk.headers["X-Bench-Sequence"] = tostring(sent)
  return wrk.format()
end
