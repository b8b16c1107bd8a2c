-- KEYS: outbox, outbox_records, affiliates; ARGV: entry id, due, user, affiliate (JSON).
--#include include/outbox.lua
if not outbox_own() then return 0 end
if redis.call('HGET', KEYS[3], ARGV[3]) == ARGV[4] then redis.call('HDEL', KEYS[3], ARGV[3]) end
outbox_remove()
return 1
