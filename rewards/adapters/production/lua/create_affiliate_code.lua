-- KEYS: outbox, outbox_records, code_seq, owner_codes, the code hash, code_names, affiliate_codes; ARGV: the entry (4),
-- owner, created_ms, the name, rebate rate ('' none), proof (JSON). Returns 'created', 'code_in_use' (the name is a
-- code's or was one), 'address_in_use' (the owner has an affiliate code) or 'stale'; nothing written but 'created'.
-- The code's `pending` is the entry: a use before the creation is published makes it stand (see USE_CODE).
--#include include/outbox.lua
if outbox_stale() then return 'stale' end
if redis.call('EXISTS', KEYS[5]) == 1 or redis.call('HEXISTS', KEYS[6], ARGV[7]) == 1 then return 'code_in_use' end
if redis.call('HEXISTS', KEYS[7], ARGV[5]) == 1 then return 'address_in_use' end
local seq = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[5], 'owner', ARGV[5], 'created_ms', ARGV[6], 'current_uses', 0, 'seq', seq, 'chosen', 1,
  'proof', ARGV[9], 'pending', ARGV[1])
if ARGV[8] ~= '' then redis.call('HSET', KEYS[5], 'rebate_rate', ARGV[8]) end
redis.call('ZADD', KEYS[4], seq, ARGV[7])
redis.call('HSET', KEYS[7], ARGV[5], ARGV[7])
outbox_add()
return 'created'
