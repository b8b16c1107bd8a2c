-- KEYS: the project's webhook deliveries (hash: id → document), its wh_version, then the wh_due and wh_log of each
-- endpoint (two keys each). ARGV: per delivery, its endpoint's index (from 1), its id, its document, when it is due,
-- its log member. Adds each delivery not held already, whatever its state (the log read again adds nothing twice).
-- Returns {how many were added, the version, then each endpoint's state} (include/webhook_state.lua).
--#include include/webhook_state.lua
local added = 0
for i = 1, #ARGV, 5 do
  if redis.call('HSETNX', KEYS[1], ARGV[i + 1], ARGV[i + 2]) == 1 then
    local e = 1 + 2 * tonumber(ARGV[i])
    redis.call('ZADD', KEYS[e], ARGV[i + 3], ARGV[i + 1])
    redis.call('ZADD', KEYS[e + 1], 0, ARGV[i + 4])
    added = added + 1
  end
end
local answer = {added, webhook_version(KEYS[2], added > 0)}
for e = 3, #KEYS, 2 do answer[#answer + 1] = endpoint_state(KEYS[e], KEYS[e + 1]) end
return answer
