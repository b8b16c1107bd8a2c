-- KEYS: outbox, outbox_records; ARGV: entry id, due. A failed publish that may have gone through: the change
-- stands, and its entry, if still its request's, is due at once (the relay publishes it; a repeat is dropped).
--#include include/outbox.lua
if not outbox_own() then return 0 end
return redis.call('ZADD', KEYS[1], 'XX', 'CH', 0, ARGV[1])
