-- KEYS: the relay's index (rw:outbox_projects); ARGV: project id. Returns the time of the touch (ms, Redis time).
--#include include/now.lua
local now = now_ms()
redis.call('ZADD', KEYS[1], 'GT', now, ARGV[1])
return now
