-- KEYS: the idempotency hash, then the claimed dedup keys; ARGV: token. Deletes only this request's claims.
local pending = 'pending:' .. ARGV[1]
for i = 2, #KEYS do
  if redis.call('GET', KEYS[i]) == pending then redis.call('DEL', KEYS[i]) end
end
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
