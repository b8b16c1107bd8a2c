-- KEYS: outbox, outbox_records, the claim check keys; ARGV: the entry (4), then for each check the value read
-- and the value to write. All or none: returns 'updated', 'changed' (a check changed since it was read: nothing
-- written) or 'stale'.
--#include include/outbox.lua
if outbox_stale() then return 'stale' end
for i = 3, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[2 * i - 1] then return 'changed' end
end
for i = 3, #KEYS do redis.call('SET', KEYS[i], ARGV[2 * i]) end
outbox_add()
return 'updated'
