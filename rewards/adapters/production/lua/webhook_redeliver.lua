-- KEYS: the project's webhook deliveries, its wh_version, the endpoint's wh_due, wh_log and wh_done. ARGV: the
-- delivery's id, its document as read, its document redelivered, when it is due (now, ms), its log member.
-- Makes it pending again, unless its document changed since it was read (returns {0}: read again).
-- Returns {1, the version, the endpoint's state} (include/webhook_state.lua).
--#include include/webhook_state.lua
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return {0} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[5])
return {1, webhook_version(KEYS[2], true), endpoint_state(KEYS[3], KEYS[4])}
