-- KEYS: the idempotency hash, the n claimed dedup keys, then user_events sets; ARGV: token, n,
-- idempotency ('store' | 'drop' | ''), body hash, response, response TTL (ms), the dedup window (ms), then one
-- event name per set. An accepted id is kept for the window (mark_processed shortens it to the hot window);
-- a user's set of event names lives a window after the user's last event.
-- Returns how many claims were lost (expired and taken by another request) before the commit.
local pending, n, lost = 'pending:' .. ARGV[1], tonumber(ARGV[2]), 0
for i = 2, n + 1 do
  local status = redis.call('GET', KEYS[i])
  if status == pending or not status then redis.call('SET', KEYS[i], 'accepted', 'PX', ARGV[7])
  elseif status ~= 'processed' and status ~= 'failed' then lost = lost + 1 end
end
for i = n + 2, #KEYS do
  redis.call('SADD', KEYS[i], ARGV[i + 6 - n])
  redis.call('PEXPIRE', KEYS[i], ARGV[7])
end
local holder = redis.call('HGET', KEYS[1], 'token')
local ours = holder == ARGV[1] or redis.call('EXISTS', KEYS[1]) == 0
if ARGV[3] == 'store' and ours then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'body_hash', ARGV[4], 'response', ARGV[5])
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
elseif ARGV[3] == 'drop' and holder == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return lost
