-- KEYS: the project's archive filter; ARGV: the dedup window (ms), the run_id the re-feed began under ('' but on its
-- last call), then two hashes per id. Adds the ids (what `dedup_ids` holds from a little before the last add of the
-- instance lost); on its last call, the filter is this instance's again if it is still the one the re-feed began
-- under (a restart meanwhile leaves it to the next re-feed). Returns 1 when it vouched, else 0.
--#include include/archive_filter.lua
local run = af_add(KEYS[1], tonumber(ARGV[1]), ARGV, 3)
if ARGV[2] == '' or run ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'run', run, 'last', af_now())
return 1
