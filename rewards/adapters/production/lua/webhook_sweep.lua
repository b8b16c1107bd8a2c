-- KEYS: the project's webhook deliveries, its wh_version, then the wh_due, wh_log and wh_done of each endpoint (three
-- keys each). ARGV: a time (ms): finished deliveries created before it are let go (pending ones stay).
-- Returns {how many went, the version, then each endpoint's state} (include/webhook_state.lua).
--#include include/webhook_state.lua
local swept = 0
for e = 3, #KEYS, 3 do
  local members = redis.call('ZRANGEBYSCORE', KEYS[e + 2], '-inf', '(' .. ARGV[1])
  for _, member in ipairs(members) do
    redis.call('HDEL', KEYS[1], string.sub(member, 17))
    redis.call('ZREM', KEYS[e + 1], member)
  end
  if #members > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[e + 2], '-inf', '(' .. ARGV[1]) end
  swept = swept + #members
end
local answer = {swept, webhook_version(KEYS[2], swept > 0)}
for e = 3, #KEYS, 3 do answer[#answer + 1] = endpoint_state(KEYS[e], KEYS[e + 1]) end
return answer
