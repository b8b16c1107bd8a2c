-- KEYS: requests, pending, by_user. ARGV: member (<project><US><id>), by_user field, the request (JSON), now.
local pending = redis.call('HGET', KEYS[3], ARGV[2])
if pending then return pending end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[1])
return ARGV[1]
