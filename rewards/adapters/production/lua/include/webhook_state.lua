-- What each webhook delivery script answers for the global index of endpoints (webhook_index.lua): the project's
-- version (its wh_version, incremented by a script that changed any of its deliveries), and of each endpoint touched
-- its state: its earliest due ('' when none is pending), how many are pending, how many it holds.
local function webhook_version(key, changed)
  if changed then return redis.call('INCR', key) end
  return tonumber(redis.call('GET', key) or '0')
end

local function endpoint_state(due, log)
  local first = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
  return {first[2] or '', redis.call('ZCARD', due), redis.call('ZCARD', log)}
end
