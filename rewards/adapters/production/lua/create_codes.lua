-- KEYS: outbox, outbox_records, code_seq, owner_codes, the code hash of each candidate; ARGV: the entry (4),
-- owner, created_ms, max_uses ('' = none), then the candidates (distinct). All or none: returns {'created'},
-- {'taken', the candidates that exist already} (nothing written) or {'stale'}. Each code's `pending` is the entry: a
-- use of a code not yet published makes its creation stand (outbox_build_on).
--#include include/outbox.lua
if outbox_stale() then return {'stale'} end
local taken = {'taken'}
for i = 5, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then taken[#taken + 1] = ARGV[i + 3] end
end
if #taken > 1 then return taken end
for i = 5, #KEYS do
  local seq = redis.call('INCR', KEYS[3])
  redis.call('HSET', KEYS[i], 'owner', ARGV[5], 'created_ms', ARGV[6], 'current_uses', 0, 'seq', seq,
    'pending', ARGV[1])
  if ARGV[7] ~= '' then redis.call('HSET', KEYS[i], 'max_uses', ARGV[7]) end
  redis.call('ZADD', KEYS[4], seq, ARGV[i + 3])
end
outbox_add()
return {'created'}
