-- KEYS: the project's webhook deliveries, its wh_version, its wh_failing, then the wh_due, wh_log and wh_done of each
-- endpoint (three keys each). ARGV: now (ms), how many finished deliveries an endpoint keeps, then each endpoint's id,
-- then per delivery: its endpoint's index (from 1), its id, its document, when it is due ('' once finished), its log
-- member, its created_ms, 1 if its attempt succeeded (else 0).
-- Records each delivery still held as attempted (one no longer held is not made again), counting its attempt in its
-- endpoint's failing-since (a success clears it, a failure starts it unless running), and lets the endpoint's
-- finished deliveries past the most it keeps go, oldest first.
-- Returns {the version, then each endpoint's state (include/webhook_state.lua) and failing-since ('' when none)}.
--#include include/webhook_state.lua
local now, kept = ARGV[1], tonumber(ARGV[2])
local endpoints = (#KEYS - 3) / 3
local changed = false
for i = 3 + endpoints, #ARGV, 7 do
  local id = ARGV[i + 1]
  if redis.call('HEXISTS', KEYS[1], id) == 1 then
    local e = 1 + 3 * tonumber(ARGV[i])
    local endpoint_id = ARGV[2 + tonumber(ARGV[i])]
    redis.call('HSET', KEYS[1], id, ARGV[i + 2])
    if ARGV[i + 3] ~= '' then
      redis.call('ZADD', KEYS[e], ARGV[i + 3], id)
      redis.call('ZREM', KEYS[e + 2], ARGV[i + 4])
    else
      redis.call('ZREM', KEYS[e], id)
      redis.call('ZADD', KEYS[e + 2], ARGV[i + 5], ARGV[i + 4])
    end
    if ARGV[i + 6] == '1' then
      redis.call('HDEL', KEYS[3], endpoint_id)
    else
      redis.call('HSETNX', KEYS[3], endpoint_id, now)
    end
    changed = true
  end
end
local answer = {webhook_version(KEYS[2], changed)}
for e = 4, #KEYS, 3 do
  local excess = redis.call('ZCARD', KEYS[e + 2]) - kept
  if excess > 0 then
    for _, member in ipairs(redis.call('ZRANGE', KEYS[e + 2], 0, excess - 1)) do
      redis.call('HDEL', KEYS[1], string.sub(member, 17))
      redis.call('ZREM', KEYS[e + 1], member)
    end
    redis.call('ZREMRANGEBYRANK', KEYS[e + 2], 0, excess - 1)
  end
  local state = endpoint_state(KEYS[e], KEYS[e + 1])
  state[4] = redis.call('HGET', KEYS[3], ARGV[2 + (e - 1) / 3]) or ''
  answer[#answer + 1] = state
end
return answer
