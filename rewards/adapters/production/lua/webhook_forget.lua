-- KEYS: the project's webhook deliveries, its wh_version, its wh_failing, the endpoint's wh_due, wh_log and wh_done.
-- ARGV: the endpoint's id. Lets every delivery of the (deleted) endpoint go, and its failing-since.
-- Returns the version.
--#include include/webhook_state.lua
local members = redis.call('ZRANGE', KEYS[5], 0, -1)
for i = 1, #members, 1000 do
  local ids = {}
  for j = i, math.min(i + 999, #members) do ids[#ids + 1] = string.sub(members[j], 17) end
  redis.call('HDEL', KEYS[1], unpack(ids))
end
redis.call('DEL', KEYS[4], KEYS[5], KEYS[6])
redis.call('HDEL', KEYS[3], ARGV[1])
return webhook_version(KEYS[2], true)
