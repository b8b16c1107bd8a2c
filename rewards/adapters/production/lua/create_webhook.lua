-- KEYS: the project's webhook endpoints (hash: id → JSON); ARGV: the endpoint's id, its JSON, the most a project
-- has. Returns 1 (added) or 0 (the project has the most already).
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
