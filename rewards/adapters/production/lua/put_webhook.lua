-- KEYS: the project's webhook endpoints (hash: id → JSON); ARGV: the endpoint's id, its JSON. Replaces an endpoint
-- that exists: 1, else 0 (deleted meanwhile: not made again).
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
