-- KEYS: the project hash; ARGV: now (ms), channel, message.
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
if redis.call('HSETNX', KEYS[1], 'deleted_ms', ARGV[1]) == 0 then return {0, 0} end
return {1, redis.call('PUBLISH', ARGV[2], ARGV[3])}
