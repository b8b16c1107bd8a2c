-- KEYS: outbox, outbox_records, referrals, referral_removals; ARGV: the entry (4), user, the referral edge as Python
-- read it. Returns 'removed', 'changed' (the edge is not that one any more: read again) or 'stale'. It stands on the
-- use that made the referral (outbox_build_on: undone after this, the use would leave the warehouse the removal of a
-- referral it never had), and is the user's pending removal, which a new use of the user carries (USE_CODE).
--#include include/outbox.lua
if outbox_stale() then return 'stale' end
if redis.call('HGET', KEYS[3], ARGV[5]) ~= ARGV[6] then return 'changed' end
redis.call('HDEL', KEYS[3], ARGV[5])
local use = cjson.decode(ARGV[6]).use
outbox_build_on(type(use) == 'string' and use or nil)
redis.call('HSET', KEYS[4], ARGV[5], ARGV[1])
outbox_add()
return 'removed'
