-- KEYS: outbox, outbox_records, then the payouts' held keys; ARGV: the entry (4), how long a decision is remembered
-- (ms), then each key's value as Python read it (the payout's row). All or none: returns 'decided', 'changed' (a key
-- is not as read: read again) or 'stale'. Each key becomes 'decided' (so a delivery processed again never holds the
-- payout again).
--#include include/outbox.lua
if outbox_stale() then return 'stale' end
for i = 3, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[i + 3] then return 'changed' end
end
for i = 3, #KEYS do redis.call('SET', KEYS[i], 'decided', 'PX', ARGV[5]) end
outbox_add()
return 'decided'
