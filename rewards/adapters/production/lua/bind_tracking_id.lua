-- KEYS: the user's tracking ids (zset); ARGV: a tracking id, when its binding expires (ms), now (ms).
-- Adds the tracking id until its expiry, drops those expired, and keeps the set until its latest expiry
-- (PEXPIREAT to its highest score: a shorter binding never cuts a longer one short; PEXPIRE's GT needs Redis 7).
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
local latest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if latest[2] then redis.call('PEXPIREAT', KEYS[1], latest[2]) end
return 1
