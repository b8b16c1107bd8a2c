-- KEYS: the project's archive filter, then dedup keys; ARGV: the status, 'processed' or 'failed' (set aside as a dead
-- letter), the hot window (ms), the dedup window (ms), then two hashes per id (the archive filter's). A pending claim
-- takes it too: its publication reached the worker. The key then lives for the hot window, never past its dedup
-- window (what is left of the TTL set on acceptance). A pending key, or one without a TTL (written before the
-- windows), gets the hot window. Every id goes into the archive filter (the workers wrote it to `dedup_ids`), its key
-- found or not.
--#include include/archive_filter.lua
for i = 2, #KEYS do
  local left, status = redis.call('PTTL', KEYS[i]), redis.call('GET', KEYS[i])
  if status then
    local claimed = string.sub(status, 1, 8) == 'pending:'  -- its TTL is the claim's, not the window's
    if not claimed and left >= 0 and left <= tonumber(ARGV[2]) then redis.call('SET', KEYS[i], ARGV[1], 'KEEPTTL')
    else redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end
  end
end
af_add(KEYS[1], tonumber(ARGV[3]), ARGV, 4)
return 1
