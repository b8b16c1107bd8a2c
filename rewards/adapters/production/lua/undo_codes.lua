-- KEYS: outbox, outbox_records, owner_codes, then the code hashes; ARGV: entry id, due, then the codes.
--#include include/outbox.lua
if not outbox_own() then return 0 end
for i = 4, #KEYS do
  redis.call('DEL', KEYS[i])
  redis.call('ZREM', KEYS[3], ARGV[i - 1])
end
outbox_remove()
return 1
