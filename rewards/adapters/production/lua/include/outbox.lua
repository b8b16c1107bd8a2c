-- The outbox entry of a change: KEYS[1] the outbox (zset), KEYS[2] its records (hash); ARGV[1] the entry id,
-- ARGV[2] its due time (ms) as its request wrote it. A change script also gets ARGV[3] the message and ARGV[4]
-- the time (ms, Redis time) past which it must not write: its touch of the relay's index would be too old
-- (rewards.adapters.production.outbox_relay: an entry is never written for a project the relay may have forgotten).
--#include include/now.lua
local function outbox_stale() return now_ms() > tonumber(ARGV[4]) end
local function outbox_add(message)
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], message or ARGV[3])
end
-- Still its request's: not leased by the relay (which moves its due time), relayed, or made due at once.
local function outbox_own()
  local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
  return due ~= false and due ~= nil and tonumber(due) == tonumber(ARGV[2])
end
local function outbox_remove()
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
end
-- A change built on another one whose entry `id` is still in the outbox (its request has not published it, and may
-- yet fail and undo it): an undo then would pull the ground from under this change (free the name a use went
-- through, put back the referral a new use replaced), so the other change stands from now on. Its entry stops being
-- its request's (its undo does nothing, its request succeeds) and is due at once (the relay publishes it unless its
-- request does: a repeat is dropped downstream). Returns its message; nil when it is published already (or `id` nil).
local function outbox_build_on(id)
  if not id then return nil end
  local message = redis.call('HGET', KEYS[2], id)
  if message then redis.call('ZADD', KEYS[1], 'XX', 0, id) end
  return message
end
-- One message of the records of two (JSON arrays, as dump_records writes them), `first`'s first.
local function outbox_join(first, second)
  return string.sub(first, 1, -2) .. ',' .. string.sub(second, 2)
end
