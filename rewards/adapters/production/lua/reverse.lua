-- KEYS: outbox, outbox_records, then each event's reversals key; ARGV: the entry (4), the keys' TTL (ms), then per
-- event the key's text as Python read it ('' none) and its new text (JSON {s: share, d: [digests], e: entry id}).
-- Returns 'reversed', 'changed' (a key is not as read: read again) or 'stale'. Stands on each event's earlier
-- reversal whose entry is still in the outbox (outbox_build_on: its undo would take a share from under this one).
--#include include/outbox.lua
if outbox_stale() then return 'stale' end
for i = 3, #KEYS do
  if (redis.call('GET', KEYS[i]) or '') ~= ARGV[2 * i] then return 'changed' end
end
for i = 3, #KEYS do
  if ARGV[2 * i] ~= '' then outbox_build_on(cjson.decode(ARGV[2 * i]).e) end
  redis.call('SET', KEYS[i], ARGV[2 * i + 1], 'PX', ARGV[5])
end
outbox_add()
return 'reversed'
