-- KEYS: outbox, outbox_records, code, code_uses, referrals, referral_removals; ARGV: the entry (4), user, use (JSON),
-- referral edge (JSON), the code's owner as Python read it, chain limit, used_by limit, its max_uses as Python read it
-- ('' for none: the published use carries it). Re-checks what may have changed since Python applied check_use;
-- 'changed' sends Python back to re-read (and 'stale' to touch the index again). Returns {'used', the code's fields,
-- its latest uses, the message to publish}.
-- The use stands on what it found: the code's creation or last rename (its name), and a removal of the user's
-- referral (the user free to be referred again), which may still be in the outbox; outbox_build_on makes them stand.
-- The removal must also reach the workers first, who refuse a use of a user the warehouse holds a referral of: the
-- use's message carries it ahead of the use (published twice, it is written once).
--#include include/chain.lua
--#include include/outbox.lua
if outbox_stale() then return {'stale'} end
local code = redis.call('HMGET', KEYS[3], 'owner', 'max_uses', 'current_uses')
if code[1] ~= ARGV[8] or (code[2] or '') ~= ARGV[11] then return {'changed'} end
if redis.call('HEXISTS', KEYS[5], ARGV[5]) == 1 then return {'changed'} end
local _, above_owner = chain(KEYS[5], code[1], tonumber(ARGV[9]))
if above_owner[ARGV[5]] then return {'changed'} end
if code[2] and tonumber(code[3]) >= tonumber(code[2]) then return {'changed'} end
if not outbox_build_on(redis.call('HGET', KEYS[3], 'pending')) then redis.call('HDEL', KEYS[3], 'pending') end
local message = ARGV[3]
local removal = outbox_build_on(redis.call('HGET', KEYS[6], ARGV[5]))
if removal then message = outbox_join(removal, message) else redis.call('HDEL', KEYS[6], ARGV[5]) end
redis.call('HINCRBY', KEYS[3], 'current_uses', 1)
redis.call('RPUSH', KEYS[4], ARGV[6])
redis.call('HSET', KEYS[5], ARGV[5], ARGV[7])
outbox_add(message)
return {'used', redis.call('HGETALL', KEYS[3]), redis.call('LRANGE', KEYS[4], -tonumber(ARGV[10]), -1), message}
