-- KEYS: as RENAME_AFFILIATE_CODE's; ARGV: entry id, due, owner, old name, new name, and the code's names, proof,
-- updated_ms and pending before the rename ('' where it had none). Puts everything back, if the code still has the new
-- name. Never after a use of the renamed code (by any name): the use made the rename stand (see UNDO_AFFILIATE_CODE).
--#include include/outbox.lua
if not outbox_own() then return 0 end
if redis.call('HGET', KEYS[3], ARGV[3]) == ARGV[5] and redis.call('EXISTS', KEYS[8]) == 1 then
  redis.call('RENAME', KEYS[8], KEYS[6])
  if redis.call('EXISTS', KEYS[9]) == 1 then redis.call('RENAME', KEYS[9], KEYS[7]) end
  redis.call('HDEL', KEYS[4], ARGV[4])
  local before = {}
  if ARGV[6] ~= '' then before = cjson.decode(ARGV[6]) end
  for _, name in ipairs(before) do redis.call('HSET', KEYS[4], name, ARGV[4]) end
  for i, field in ipairs({'names', 'proof', 'updated_ms', 'pending'}) do
    if ARGV[5 + i] == '' then redis.call('HDEL', KEYS[6], field)
    else redis.call('HSET', KEYS[6], field, ARGV[5 + i]) end
  end
  local seq = redis.call('ZSCORE', KEYS[5], ARGV[5])
  redis.call('ZREM', KEYS[5], ARGV[5])
  if seq then redis.call('ZADD', KEYS[5], seq, ARGV[4]) end
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
end
outbox_remove()
return 1
