-- KEYS: outbox, outbox_records, owner_codes, the code hash, affiliate_codes; ARGV: entry id, due, the name, owner.
-- It never frees a name that was used: the use made the creation stand (outbox_build_on), so the entry is not the
-- request's any more and nothing is undone. (Refusing uses until the creation is published would fail uses of a
-- valid name; keeping the name reserved but unpublished would leave the warehouse uses of a code it never had.)
--#include include/outbox.lua
if not outbox_own() then return 0 end
redis.call('DEL', KEYS[4])
redis.call('ZREM', KEYS[3], ARGV[3])
if redis.call('HGET', KEYS[5], ARGV[4]) == ARGV[3] then redis.call('HDEL', KEYS[5], ARGV[4]) end
outbox_remove()
return 1
