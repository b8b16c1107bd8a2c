-- KEYS: dedup keys; ARGV: the status, 'processed' or 'failed' (set aside as a dead letter), the hot window
-- (ms). A pending claim takes it too: its publication reached the worker. The key then lives for the hot window,
-- never past its dedup window (what is left of the TTL set on acceptance). A pending key, or one without a TTL
-- (written before the windows), gets the hot window.
for i = 1, #KEYS do
  local left, status = redis.call('PTTL', KEYS[i]), redis.call('GET', KEYS[i])
  if status then
    local claimed = string.sub(status, 1, 8) == 'pending:'  -- its TTL is the claim's, not the window's
    if not claimed and left >= 0 and left <= tonumber(ARGV[2]) then redis.call('SET', KEYS[i], ARGV[1], 'KEEPTTL')
    else redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end
  end
end
return 1
