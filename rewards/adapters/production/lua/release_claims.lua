-- KEYS: dedup keys; ARGV: the token of this request's claims. Releases those of them still pending for it
-- (ids the claim found fresh but the warehouse knows: duplicates after all).
local pending = 'pending:' .. ARGV[1]
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == pending then redis.call('DEL', KEYS[i]) end
end
return 1
