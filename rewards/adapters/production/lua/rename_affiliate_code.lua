-- KEYS: outbox, outbox_records, affiliate_codes, code_names, owner_codes, the old name's code hash and code_uses, the
-- new name's code hash and code_uses; ARGV: the entry (4), owner, old name, new name, proof (JSON), now (ms). The
-- code's hash and uses move to the new name; the old name and every former one point to it; a former name taken
-- again stops being one. Returns 'renamed', 'changed' (the owner's code is not the old name any more: read again),
-- 'code_in_use' (another code has or had the new name) or 'stale'. It stands on the code's creation or last rename
-- (outbox_build_on), and is the code's `pending` change in their place.
--#include include/outbox.lua
if outbox_stale() then return 'stale' end
if redis.call('HGET', KEYS[3], ARGV[5]) ~= ARGV[6] or redis.call('EXISTS', KEYS[6]) == 0 then return 'changed' end
local own = redis.call('HGET', KEYS[4], ARGV[7]) == ARGV[6]
if not own and (redis.call('EXISTS', KEYS[8]) == 1 or redis.call('HEXISTS', KEYS[4], ARGV[7]) == 1) then
  return 'code_in_use'
end
local names = {}
for _, name in ipairs(cjson.decode(redis.call('HGET', KEYS[6], 'names') or '[]')) do
  if name ~= ARGV[7] then
    names[#names + 1] = name
    redis.call('HSET', KEYS[4], name, ARGV[7])
  end
end
names[#names + 1] = ARGV[6]
redis.call('HDEL', KEYS[4], ARGV[7])
redis.call('HSET', KEYS[4], ARGV[6], ARGV[7])
redis.call('RENAME', KEYS[6], KEYS[8])
if redis.call('EXISTS', KEYS[7]) == 1 then redis.call('RENAME', KEYS[7], KEYS[9]) end
outbox_build_on(redis.call('HGET', KEYS[8], 'pending'))
redis.call('HSET', KEYS[8], 'names', cjson.encode(names), 'proof', ARGV[8], 'updated_ms', ARGV[9], 'pending', ARGV[1])
local seq = redis.call('ZSCORE', KEYS[5], ARGV[6])
redis.call('ZREM', KEYS[5], ARGV[6])
if seq then redis.call('ZADD', KEYS[5], seq, ARGV[7]) end
redis.call('HSET', KEYS[3], ARGV[5], ARGV[7])
outbox_add()
return 'renamed'
