-- KEYS: outbox, outbox_records, the claim check keys; ARGV: entry id, due, then for each check the value
-- written and the value to put back (only where no later update replaced ours).
--#include include/outbox.lua
if not outbox_own() then return 0 end
for i = 3, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[2 * i - 3] then redis.call('SET', KEYS[i], ARGV[2 * i - 2]) end
end
outbox_remove()
return 1
