-- KEYS: the project's archive filter, then dedup keys; ARGV: the status, 'processed' or 'failed' (set aside as a dead
-- letter), the hot window (ms), the dedup window (ms), then two hashes per id (the archive filter's). A pending claim
-- takes it too: its publication reached the worker. The key then lives for the hot window, never past its dedup
-- window (what is left of the TTL set on acceptance). A pending key, or one without a TTL (written before the
-- windows), gets the hot window. Every id goes into the archive filter (the workers wrote it to `dedup_ids`), its key
-- found or not.
-- Two calls per key (the status set, its TTL cut to the hot window at most: PEXPIRE's LT counts a key without a TTL
-- as one of infinite TTL), not three (PTTL, GET, SET): marks are most of Redis's work per event.
--#include include/archive_filter.lua
for i = 2, #KEYS do
  local status = redis.call('SET', KEYS[i], ARGV[1], 'XX', 'KEEPTTL', 'GET')
  if status then
    if string.sub(status, 1, 8) == 'pending:' then redis.call('PEXPIRE', KEYS[i], ARGV[2])  -- its TTL was the claim's
    else redis.call('PEXPIRE', KEYS[i], ARGV[2], 'LT') end
  end
end
af_add(KEYS[1], tonumber(ARGV[3]), ARGV, 4)
return 1
