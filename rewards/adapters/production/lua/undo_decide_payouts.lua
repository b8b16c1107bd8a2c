-- KEYS: outbox, outbox_records, then the payouts' held keys; ARGV: entry id, due, then each key's row before. Holds
-- them again, if the entry is still the request's own.
--#include include/outbox.lua
if not outbox_own() then return 0 end
for i = 3, #KEYS do
  if redis.call('GET', KEYS[i]) == 'decided' then redis.call('SET', KEYS[i], ARGV[i]) end
end
outbox_remove()
return 1
