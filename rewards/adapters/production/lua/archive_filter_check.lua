-- KEYS: the project's archive filter; ARGV: the dedup window (ms), the authority margin (ms), then two hashes per id.
-- Returns {'checked', indexes (0-based) of the ids the archive may hold} when the filter is authoritative: it holds
-- every id written since a window and the margin ago, on this very Redis instance; {'new'} when it does not cover
-- that long (or does not exist); {'restarted', the instance's run_id, the last add of the one before (ms)} when this
-- instance is not the one it was fed on (a restart or a failover may have lost its last second: see the module).
--#include include/archive_filter.lua
local filter, window = KEYS[1], tonumber(ARGV[1])
local f = redis.call('HMGET', filter, 'run', 'cover', 'g', 'g_subs', 'p_subs', 'last')
if not f[3] then return {'new'} end
local run = af_run_id()
if f[1] ~= run then return {'restarted', run, f[6]} end
if tonumber(f[2]) > af_now() - window - tonumber(ARGV[2]) then return {'new'} end
local g, subs, previous, maybes = tonumber(f[3]), tonumber(f[4]), tonumber(f[5]), {}
for i = 3, #ARGV, 2 do
  local h1, h2 = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  if af_has(filter, g, subs, h1, h2) or af_has(filter, g - 1, previous, h1, h2) then
    maybes[#maybes + 1] = (i - 3) / 2
  end
end
return {'checked', maybes}
