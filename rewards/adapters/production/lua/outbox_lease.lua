-- KEYS: outbox, outbox_records; ARGV: how many entries at most, the lease (ms). Takes the entries due (oldest
-- first) and makes them due again after the lease: a relay that dies with them leaves them to another.
-- Returns {entries in the outbox, entries due, then id and message of each entry taken}.
--#include include/now.lua
local now = now_ms()
local due = redis.call('ZCOUNT', KEYS[1], '-inf', now)
local taken = {redis.call('ZCARD', KEYS[1]), due}
if due == 0 then return taken end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))) do
  local message = redis.call('HGET', KEYS[2], id)
  if message then
    redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), id)
    taken[#taken + 1] = id
    taken[#taken + 1] = message
  else
    redis.call('ZREM', KEYS[1], id)  -- never written alone: dropped rather than leased forever
  end
end
return taken
