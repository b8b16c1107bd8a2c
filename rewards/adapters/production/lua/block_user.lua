-- KEYS: blocklist (hash), blocklist_by_time (zset); ARGV: <user>, the reason (JSON: a string or null), now (ms).
-- Puts the user on the blocklist, or replaces its reason and keeps its time. Returns its time (ms).
local entry = redis.call('HGET', KEYS[1], ARGV[1])
local created = ARGV[3]
if entry then created = tostring(redis.call('ZSCORE', KEYS[2], ARGV[1]) or ARGV[3]) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], 'NX', created, ARGV[1])
return created
