-- KEYS: the API key hash; ARGV: now (ms), channel, message.
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
redis.call('HSET', KEYS[1], 'revoked_ms', ARGV[1])
return {1, redis.call('PUBLISH', ARGV[2], ARGV[3])}
