-- KEYS: the relay's index; ARGV: project id, its last touch as read. Removes it only if not touched since.
local touched = redis.call('ZSCORE', KEYS[1], ARGV[1])
if touched and tonumber(touched) == tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
