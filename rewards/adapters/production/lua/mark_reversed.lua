-- KEYS: events' reversal_written keys; ARGV: their TTL (ms), then each one's share written (fixed-width text: texts
-- compare as the shares do). A share never goes down (a delivery processed again late marks an older one).
for i = 1, #KEYS do
  local held = redis.call('GET', KEYS[i])
  if not held or held < ARGV[i + 1] then redis.call('SET', KEYS[i], ARGV[i + 1], 'PX', ARGV[1]) end
end
return 1
