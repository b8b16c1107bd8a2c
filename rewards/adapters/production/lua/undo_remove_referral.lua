-- KEYS: outbox, outbox_records, referrals, referral_removals; ARGV: entry id, due, user, the edge removed. Puts it
-- back. (Nobody referred the user since: that use would have made the removal stand. Should the user be referred all
-- the same, the removal stands and is published: its entry due at once, it returns 0.)
--#include include/outbox.lua
if not outbox_own() then return 0 end
if redis.call('HSETNX', KEYS[3], ARGV[3], ARGV[4]) == 0 then
  redis.call('ZADD', KEYS[1], 'XX', 0, ARGV[1])
  return 0
end
if redis.call('HGET', KEYS[4], ARGV[3]) == ARGV[1] then redis.call('HDEL', KEYS[4], ARGV[3]) end
outbox_remove()
return 1
