-- KEYS: the project's webhook deliveries, its wh_version, the endpoint's wh_due and wh_log. ARGV: now (ms), how many
-- at most, when the lease ends (ms). Takes the endpoint's deliveries due by now, earliest first, each due again when
-- the lease ends: a dispatcher that dies with them leaves them to be tried again then.
-- Returns {the version, the endpoint's state (include/webhook_state.lua), then the document of each taken}.
--#include include/webhook_state.lua
local taken, changed = {}, false
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))) do
  local document = redis.call('HGET', KEYS[1], id)
  if document then
    redis.call('ZADD', KEYS[3], 'XX', ARGV[3], id)
    taken[#taken + 1] = document
  else
    redis.call('ZREM', KEYS[3], id)  -- never written alone: dropped rather than leased forever
  end
  changed = true
end
local answer = {webhook_version(KEYS[2], changed), endpoint_state(KEYS[3], KEYS[4])}
for _, document in ipairs(taken) do answer[#answer + 1] = document end
return answer
