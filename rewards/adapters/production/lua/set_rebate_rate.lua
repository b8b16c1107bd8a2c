-- KEYS: the code hash; ARGV: owner, rebate rate ('' none), proof (JSON), now (ms). Returns 1, or 0 (nothing written)
-- when the code is not the owner's (or no longer has this name).
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], 'rebate_rate')
else redis.call('HSET', KEYS[1], 'rebate_rate', ARGV[2]) end
redis.call('HSET', KEYS[1], 'proof', ARGV[3], 'updated_ms', ARGV[4])
return 1
