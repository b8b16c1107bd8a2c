"""Lua scripts of the Redis state store: each one changes (or reads) several keys of one project atomically.

They only guard and apply; the domain rules stay in Python (rewards.domain), which reads first and
decides, and a script re-checks whatever a concurrent request could have changed in between. Reads that must be
consistent are scripts too: the store uses no MULTI/WATCH transactions, so that it runs on a Redis Cluster as on
one node (rewards.adapters.production.redis_client). Each script's keys lie in one cluster slot
(tests/test_redis_cluster.py checks every call the store makes).

A state change the warehouse must learn of writes, in the same script, an entry of the project's outbox: the
message to publish (rewards.adapters.production.redis_state), relayed by rewards.adapters.production.outbox_relay if
its request does not publish it. Its undo removes the change and the entry together, and only while the entry is
still its request's (the relay has neither leased nor published it, and no other change was built on it:
outbox_build_on).
"""

from dataclasses import dataclass

from redis.commands.core import AsyncScript

from rewards.adapters.production.redis_client import RedisClient

# Walks referrer edges up from `start`, as SqliteStateStore._chain: stops at the top, at `depth`
# referrers, or on meeting a referrer already in the chain.
_CHAIN = """
local function chain(referrals, start, depth)
  local found, seen = {}, {}
  local edge = redis.call('HGET', referrals, start)
  while edge and #found < depth do
    local by = cjson.decode(edge).by
    if seen[by] then break end
    seen[by] = true
    found[#found + 1] = by
    edge = redis.call('HGET', referrals, by)
  end
  return found, seen
end
"""

_NOW = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"""

# The outbox entry of a change: KEYS[1] the outbox (zset), KEYS[2] its records (hash); ARGV[1] the entry id,
# ARGV[2] its due time (ms) as its request wrote it. A change script also gets ARGV[3] the message and ARGV[4]
# the time (ms, Redis time) past which it must not write: its touch of the relay's index would be too old
# (rewards.adapters.production.outbox_relay: an entry is never written for a project the relay may have forgotten).
_OUTBOX = (
    _NOW
    + """
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
"""
)

# Key changes (a key revoked, a project deleted) are published with the change, in the same script, so that no
# process keeps serving a cached key for longer than its bound (rewards.domain.keys.KeyCache). ARGV[2] the channel,
# ARGV[3] the message. They return {changed (1 or 0), how many processes the message reached}.

# KEYS: the project hash; ARGV: now (ms), channel, message.
DELETE_PROJECT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
if redis.call('HSETNX', KEYS[1], 'deleted_ms', ARGV[1]) == 0 then return {0, 0} end
return {1, redis.call('PUBLISH', ARGV[2], ARGV[3])}
"""

# KEYS: the API key hash; ARGV: now (ms), channel, message.
REVOKE_KEY = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
redis.call('HSET', KEYS[1], 'revoked_ms', ARGV[1])
return {1, redis.call('PUBLISH', ARGV[2], ARGV[3])}
"""

# KEYS: the acknowledgements of one key change (list); ARGV: their TTL (ms). A process applied the change.
ACK_KEY_CHANGE = """
redis.call('RPUSH', KEYS[1], 1)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""

# KEYS: outbox, outbox_records, affiliates; ARGV: the entry (4), user, affiliate (JSON).
# Returns 'created', 'exists' (nothing written) or 'stale'.
CREATE_AFFILIATE = (
    _OUTBOX
    + """
if outbox_stale() then return 'stale' end
if redis.call('HSETNX', KEYS[3], ARGV[5], ARGV[6]) == 0 then return 'exists' end
outbox_add()
return 'created'
"""
)

# KEYS: outbox, outbox_records, affiliates; ARGV: entry id, due, user, affiliate (JSON).
UNDO_AFFILIATE = (
    _OUTBOX
    + """
if not outbox_own() then return 0 end
if redis.call('HGET', KEYS[3], ARGV[3]) == ARGV[4] then redis.call('HDEL', KEYS[3], ARGV[3]) end
outbox_remove()
return 1
"""
)

# KEYS: outbox, outbox_records, code_seq, owner_codes, the code hash of each candidate; ARGV: the entry (4),
# owner, created_ms, max_uses ('' = none), then the candidates (distinct). All or none: returns {'created'},
# {'taken', the candidates that exist already} (nothing written) or {'stale'}. Each code's `pending` is the entry: a
# use of a code not yet published makes its creation stand (outbox_build_on).
CREATE_CODES = (
    _OUTBOX
    + """
if outbox_stale() then return {'stale'} end
local taken = {'taken'}
for i = 5, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then taken[#taken + 1] = ARGV[i + 3] end
end
if #taken > 1 then return taken end
for i = 5, #KEYS do
  local seq = redis.call('INCR', KEYS[3])
  redis.call('HSET', KEYS[i], 'owner', ARGV[5], 'created_ms', ARGV[6], 'current_uses', 0, 'seq', seq,
    'pending', ARGV[1])
  if ARGV[7] ~= '' then redis.call('HSET', KEYS[i], 'max_uses', ARGV[7]) end
  redis.call('ZADD', KEYS[4], seq, ARGV[i + 3])
end
outbox_add()
return {'created'}
"""
)

# KEYS: outbox, outbox_records, owner_codes, then the code hashes; ARGV: entry id, due, then the codes.
UNDO_CODES = (
    _OUTBOX
    + """
if not outbox_own() then return 0 end
for i = 4, #KEYS do
  redis.call('DEL', KEYS[i])
  redis.call('ZREM', KEYS[3], ARGV[i - 1])
end
outbox_remove()
return 1
"""
)

# KEYS: owner_codes; ARGV: the first and last rank of the page (newest first). Returns {the owner's count of
# codes, the codes of the page}.
OWNER_CODES = """
return {redis.call('ZCARD', KEYS[1]), redis.call('ZREVRANGE', KEYS[1], ARGV[1], ARGV[2])}
"""

# KEYS: code_names, the code hash of the current name Python found for a name, and optionally referrals; ARGV: the
# name, that current name, a user. A snapshot of the code the name finds (a rename moves a code's hash to its new
# name): {'code', its fields (flat; none if no code has the name), the user's referral edge ('' none)}, or {'moved',
# the name's current name} when it is not the one given (nothing read: Python reads again there).
CODE_BY_NAME = """
local current = redis.call('HGET', KEYS[1], ARGV[1]) or ARGV[1]
if current ~= ARGV[2] then return {'moved', current} end
local edge = KEYS[3] and redis.call('HGET', KEYS[3], ARGV[3]) or ''
return {'code', redis.call('HGETALL', KEYS[2]), edge}
"""

# KEYS: the code hash and the code_uses list of each code; ARGV: how many of the latest uses to read. Returns, per
# code, {its fields (flat; none if it does not exist), its latest uses}.
READ_CODES = """
local found = {}
for i = 1, #KEYS, 2 do
  found[#found + 1] = {redis.call('HGETALL', KEYS[i]), redis.call('LRANGE', KEYS[i + 1], -tonumber(ARGV[1]), -1)}
end
return found
"""

# KEYS: code, code_uses; ARGV: max_uses ('' for none), how many of the latest uses to read. Python checked the
# new limit against the uses; this re-checks it: 'changed' (nothing written) if the code is gone or has more
# uses than the limit by now (0, which disables the code, is never below them). Returns {'set', the code's fields
# (flat), its latest uses} or {'changed'}.
SET_MAX_USES = """
local uses = redis.call('HGET', KEYS[1], 'current_uses')
if not uses or (ARGV[1] ~= '' and ARGV[1] ~= '0' and tonumber(uses) > tonumber(ARGV[1])) then return {'changed'} end
if ARGV[1] == '' then redis.call('HDEL', KEYS[1], 'max_uses') else redis.call('HSET', KEYS[1], 'max_uses', ARGV[1]) end
return {'set', redis.call('HGETALL', KEYS[1]), redis.call('LRANGE', KEYS[2], -tonumber(ARGV[2]), -1)}
"""

# KEYS: referrals; ARGV: depth, then the users. Returns one chain per user.
REFERRER_CHAINS = (
    _CHAIN
    + """
local chains, depth = {}, tonumber(ARGV[1])
for i = 2, #ARGV do
  chains[#chains + 1] = chain(KEYS[1], ARGV[i], depth)
end
return chains
"""
)

# KEYS: outbox, outbox_records, code, code_uses, referrals, referral_removals; ARGV: the entry (4), user, use (JSON),
# referral edge (JSON), the code's owner as Python read it, chain limit, used_by limit, its max_uses as Python read it
# ('' for none: the published use carries it). Re-checks what may have changed since Python applied check_use;
# 'changed' sends Python back to re-read (and 'stale' to touch the index again). Returns {'used', the code's fields,
# its latest uses, the message to publish}.
# The use stands on what it found: the code's creation or last rename (its name), and a removal of the user's
# referral (the user free to be referred again), which may still be in the outbox; outbox_build_on makes them stand.
# The removal must also reach the workers first, who refuse a use of a user the warehouse holds a referral of: the
# use's message carries it ahead of the use (published twice, it is written once).
USE_CODE = (
    _CHAIN
    + _OUTBOX
    + """
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
"""
)

# KEYS: outbox, outbox_records, code_names, code, code_uses, referrals (code and code_uses: of the current name Python
# found for the name the use was made under); ARGV: entry id, due, the use (JSON), user, use id, the name used under,
# that current name. {'moved', the current name} when the code was renamed since Python looked (nothing written:
# Python undoes again under that name).
UNDO_USE = (
    _OUTBOX
    + """
if not outbox_own() then return 0 end
local current = redis.call('HGET', KEYS[3], ARGV[6]) or ARGV[6]
if current ~= ARGV[7] then return {'moved', current} end
if redis.call('LREM', KEYS[5], -1, ARGV[3]) == 1 then redis.call('HINCRBY', KEYS[4], 'current_uses', -1) end
local edge = redis.call('HGET', KEYS[6], ARGV[4])
if edge and cjson.decode(edge).use == ARGV[5] then redis.call('HDEL', KEYS[6], ARGV[4]) end
outbox_remove()
return 1
"""
)

# KEYS: the idempotency hash, then the dedup key of each event; ARGV: token, pending TTL (ms),
# '1' when an Idempotency-Key is given, its body hash.
# Returns {'conflict'} | {'replay', response} | {'busy', indexes pending by others} | {'claimed', fresh indexes}
# (indexes 0-based). Nothing is written unless the whole batch is claimed.
CLAIM_BATCH = """
local token, ttl = ARGV[1], ARGV[2]
if ARGV[3] == '1' then
  local stored = redis.call('HMGET', KEYS[1], 'body_hash', 'response')
  if stored[2] then
    if stored[1] ~= ARGV[4] then return {'conflict'} end
    return {'replay', stored[2]}
  end
  if stored[1] then return {'busy', {}} end
end
local fresh, busy, seen = {}, {}, {}
for i = 2, #KEYS do
  if not seen[KEYS[i]] then
    seen[KEYS[i]] = true
    local status = redis.call('GET', KEYS[i])
    if not status then fresh[#fresh + 1] = i - 2
    elseif status ~= 'accepted' and status ~= 'processed' and status ~= 'failed' then busy[#busy + 1] = i - 2 end
  end
end
if #busy > 0 then return {'busy', busy} end
for _, index in ipairs(fresh) do redis.call('SET', KEYS[index + 2], 'pending:' .. token, 'PX', ttl) end
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'body_hash', ARGV[4], 'token', token)
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return {'claimed', fresh}
"""

# KEYS: the idempotency hash, the n claimed dedup keys, then user_events sets; ARGV: token, n,
# idempotency ('store' | 'drop' | ''), body hash, response, response TTL (ms), the dedup window (ms), then one
# event name per set. An accepted id is kept for the window (mark_processed shortens it to the hot window);
# a user's set of event names lives a window after the user's last event.
# Returns how many claims were lost (expired and taken by another request) before the commit.
COMMIT_BATCH = """
local pending, n, lost = 'pending:' .. ARGV[1], tonumber(ARGV[2]), 0
for i = 2, n + 1 do
  local status = redis.call('GET', KEYS[i])
  if status == pending or not status then redis.call('SET', KEYS[i], 'accepted', 'PX', ARGV[7])
  elseif status ~= 'processed' and status ~= 'failed' then lost = lost + 1 end
end
for i = n + 2, #KEYS do
  redis.call('SADD', KEYS[i], ARGV[i + 6 - n])
  redis.call('PEXPIRE', KEYS[i], ARGV[7])
end
local holder = redis.call('HGET', KEYS[1], 'token')
local ours = holder == ARGV[1] or redis.call('EXISTS', KEYS[1]) == 0
if ARGV[3] == 'store' and ours then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'body_hash', ARGV[4], 'response', ARGV[5])
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
elseif ARGV[3] == 'drop' and holder == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return lost
"""

# KEYS: the idempotency hash, then the claimed dedup keys; ARGV: token. Deletes only this request's claims.
ABORT_BATCH = """
local pending = 'pending:' .. ARGV[1]
for i = 2, #KEYS do
  if redis.call('GET', KEYS[i]) == pending then redis.call('DEL', KEYS[i]) end
end
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""

# KEYS: dedup keys; ARGV: the status, 'processed' or 'failed' (set aside as a dead letter), the hot window
# (ms). A pending claim takes it too: its publication reached the worker. The key then lives for the hot window,
# never past its dedup window (what is left of the TTL set on acceptance). A pending key, or one without a TTL
# (written before the windows), gets the hot window.
MARK_PROCESSED = """
for i = 1, #KEYS do
  local left, status = redis.call('PTTL', KEYS[i]), redis.call('GET', KEYS[i])
  if status then
    local claimed = string.sub(status, 1, 8) == 'pending:'  -- its TTL is the claim's, not the window's
    if not claimed and left >= 0 and left <= tonumber(ARGV[2]) then redis.call('SET', KEYS[i], ARGV[1], 'KEEPTTL')
    else redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end
  end
end
return 1
"""

# KEYS: dedup keys; ARGV: the token of this request's claims. Releases those of them still pending for it
# (ids the claim found fresh but the warehouse knows: duplicates after all).
RELEASE_CLAIMS = """
local pending = 'pending:' .. ARGV[1]
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == pending then redis.call('DEL', KEYS[i]) end
end
return 1
"""

# KEYS: claim check keys; ARGV: their records. Registers, all at once, those not registered yet.
REGISTER_CLAIM_CHECKS = """
for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[i], 'NX') end
return 1
"""

# KEYS: outbox, outbox_records, the claim check keys; ARGV: the entry (4), then for each check the value read
# and the value to write. All or none: returns 'updated', 'changed' (a check changed since it was read: nothing
# written) or 'stale'.
UPDATE_CLAIM_CHECKS = (
    _OUTBOX
    + """
if outbox_stale() then return 'stale' end
for i = 3, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[2 * i - 1] then return 'changed' end
end
for i = 3, #KEYS do redis.call('SET', KEYS[i], ARGV[2 * i]) end
outbox_add()
return 'updated'
"""
)

# KEYS: outbox, outbox_records, the claim check keys; ARGV: entry id, due, then for each check the value
# written and the value to put back (only where no later update replaced ours).
UNDO_CLAIM_CHECKS = (
    _OUTBOX
    + """
if not outbox_own() then return 0 end
for i = 3, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[2 * i - 3] then redis.call('SET', KEYS[i], ARGV[2 * i - 2]) end
end
outbox_remove()
return 1
"""
)

# KEYS: outbox, outbox_records; ARGV: entry id, due. A failed publish that may have gone through: the change
# stands, and its entry, if still its request's, is due at once (the relay publishes it; a repeat is dropped).
OUTBOX_DUE_NOW = (
    _OUTBOX
    + """
if not outbox_own() then return 0 end
return redis.call('ZADD', KEYS[1], 'XX', 'CH', 0, ARGV[1])
"""
)

# KEYS: outbox, outbox_records; ARGV: the entry ids (at least one). Published: forgotten.
OUTBOX_DELETE = """
redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
return 1
"""

# KEYS: outbox, outbox_records; ARGV: how many entries at most, the lease (ms). Takes the entries due (oldest
# first) and makes them due again after the lease: a relay that dies with them leaves them to another.
# Returns {entries in the outbox, entries due, then id and message of each entry taken}.
OUTBOX_LEASE = (
    _NOW
    + """
local now = now_ms()
local due = redis.call('ZCOUNT', KEYS[1], '-inf', now)
local taken = {redis.call('ZCARD', KEYS[1]), due}
if due == 0 then return taken end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))) do
  local message = redis.call('HGET', KEYS[2], id)
  if message then
    redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), id)
    taken[#taken + 1] = id
    taken[#taken + 1] = message
  else
    redis.call('ZREM', KEYS[1], id)  -- never written alone: dropped rather than leased forever
  end
end
return taken
"""
)

# KEYS: the relay's index (rw:outbox_projects); ARGV: project id. Returns the time of the touch (ms, Redis time).
OUTBOX_TOUCH = (
    _NOW
    + """
local now = now_ms()
redis.call('ZADD', KEYS[1], 'GT', now, ARGV[1])
return now
"""
)

# KEYS: the relay's index. Returns {now (ms, Redis time), {project, last touched, ...}}.
OUTBOX_INDEX = (
    _NOW
    + """
return {now_ms(), redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')}
"""
)

# KEYS: the relay's index; ARGV: project id, its last touch as read. Removes it only if not touched since.
OUTBOX_FORGET_PROJECT = """
local touched = redis.call('ZSCORE', KEYS[1], ARGV[1])
if touched and tonumber(touched) == tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
"""


# -- affiliate codes (API.md §7): one per user, in the namespace of referral codes; a renamed code keeps its names ----

# KEYS: outbox, outbox_records, code_seq, owner_codes, the code hash, code_names, affiliate_codes; ARGV: the entry (4),
# owner, created_ms, the name, rebate rate ('' none), proof (JSON). Returns 'created', 'code_in_use' (the name is a
# code's or was one), 'address_in_use' (the owner has an affiliate code) or 'stale'; nothing written but 'created'.
# The code's `pending` is the entry: a use before the creation is published makes it stand (see USE_CODE).
CREATE_AFFILIATE_CODE = (
    _OUTBOX
    + """
if outbox_stale() then return 'stale' end
if redis.call('EXISTS', KEYS[5]) == 1 or redis.call('HEXISTS', KEYS[6], ARGV[7]) == 1 then return 'code_in_use' end
if redis.call('HEXISTS', KEYS[7], ARGV[5]) == 1 then return 'address_in_use' end
local seq = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[5], 'owner', ARGV[5], 'created_ms', ARGV[6], 'current_uses', 0, 'seq', seq, 'chosen', 1,
  'proof', ARGV[9], 'pending', ARGV[1])
if ARGV[8] ~= '' then redis.call('HSET', KEYS[5], 'rebate_rate', ARGV[8]) end
redis.call('ZADD', KEYS[4], seq, ARGV[7])
redis.call('HSET', KEYS[7], ARGV[5], ARGV[7])
outbox_add()
return 'created'
"""
)

# KEYS: outbox, outbox_records, owner_codes, the code hash, affiliate_codes; ARGV: entry id, due, the name, owner.
# It never frees a name that was used: the use made the creation stand (outbox_build_on), so the entry is not the
# request's any more and nothing is undone. (Refusing uses until the creation is published would fail uses of a
# valid name; keeping the name reserved but unpublished would leave the warehouse uses of a code it never had.)
UNDO_AFFILIATE_CODE = (
    _OUTBOX
    + """
if not outbox_own() then return 0 end
redis.call('DEL', KEYS[4])
redis.call('ZREM', KEYS[3], ARGV[3])
if redis.call('HGET', KEYS[5], ARGV[4]) == ARGV[3] then redis.call('HDEL', KEYS[5], ARGV[4]) end
outbox_remove()
return 1
"""
)

# KEYS: outbox, outbox_records, affiliate_codes, code_names, owner_codes, the old name's code hash and code_uses, the
# new name's code hash and code_uses; ARGV: the entry (4), owner, old name, new name, proof (JSON), now (ms). The
# code's hash and uses move to the new name; the old name and every former one point to it; a former name taken
# again stops being one. Returns 'renamed', 'changed' (the owner's code is not the old name any more: read again),
# 'code_in_use' (another code has or had the new name) or 'stale'. It stands on the code's creation or last rename
# (outbox_build_on), and is the code's `pending` change in their place.
RENAME_AFFILIATE_CODE = (
    _OUTBOX
    + """
if outbox_stale() then return 'stale' end
if redis.call('HGET', KEYS[3], ARGV[5]) ~= ARGV[6] or redis.call('EXISTS', KEYS[6]) == 0 then return 'changed' end
local own = redis.call('HGET', KEYS[4], ARGV[7]) == ARGV[6]
if not own and (redis.call('EXISTS', KEYS[8]) == 1 or redis.call('HEXISTS', KEYS[4], ARGV[7]) == 1) then
  return 'code_in_use'
end
local names = {}
for _, name in ipairs(cjson.decode(redis.call('HGET', KEYS[6], 'names') or '[]')) do
  if name ~= ARGV[7] then
    names[#names + 1] = name
    redis.call('HSET', KEYS[4], name, ARGV[7])
  end
end
names[#names + 1] = ARGV[6]
redis.call('HDEL', KEYS[4], ARGV[7])
redis.call('HSET', KEYS[4], ARGV[6], ARGV[7])
redis.call('RENAME', KEYS[6], KEYS[8])
if redis.call('EXISTS', KEYS[7]) == 1 then redis.call('RENAME', KEYS[7], KEYS[9]) end
outbox_build_on(redis.call('HGET', KEYS[8], 'pending'))
redis.call('HSET', KEYS[8], 'names', cjson.encode(names), 'proof', ARGV[8], 'updated_ms', ARGV[9], 'pending', ARGV[1])
local seq = redis.call('ZSCORE', KEYS[5], ARGV[6])
redis.call('ZREM', KEYS[5], ARGV[6])
if seq then redis.call('ZADD', KEYS[5], seq, ARGV[7]) end
redis.call('HSET', KEYS[3], ARGV[5], ARGV[7])
outbox_add()
return 'renamed'
"""
)

# KEYS: as RENAME_AFFILIATE_CODE's; ARGV: entry id, due, owner, old name, new name, and the code's names, proof,
# updated_ms and pending before the rename ('' where it had none). Puts everything back, if the code still has the new
# name. Never after a use of the renamed code (by any name): the use made the rename stand (see UNDO_AFFILIATE_CODE).
UNDO_RENAME_AFFILIATE_CODE = (
    _OUTBOX
    + """
if not outbox_own() then return 0 end
if redis.call('HGET', KEYS[3], ARGV[3]) == ARGV[5] and redis.call('EXISTS', KEYS[8]) == 1 then
  redis.call('RENAME', KEYS[8], KEYS[6])
  if redis.call('EXISTS', KEYS[9]) == 1 then redis.call('RENAME', KEYS[9], KEYS[7]) end
  redis.call('HDEL', KEYS[4], ARGV[4])
  local before = {}
  if ARGV[6] ~= '' then before = cjson.decode(ARGV[6]) end
  for _, name in ipairs(before) do redis.call('HSET', KEYS[4], name, ARGV[4]) end
  for i, field in ipairs({'names', 'proof', 'updated_ms', 'pending'}) do
    if ARGV[5 + i] == '' then redis.call('HDEL', KEYS[6], field)
    else redis.call('HSET', KEYS[6], field, ARGV[5 + i]) end
  end
  local seq = redis.call('ZSCORE', KEYS[5], ARGV[5])
  redis.call('ZREM', KEYS[5], ARGV[5])
  if seq then redis.call('ZADD', KEYS[5], seq, ARGV[4]) end
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
end
outbox_remove()
return 1
"""
)

# KEYS: the code hash; ARGV: owner, rebate rate ('' none), proof (JSON), now (ms). Returns 1, or 0 (nothing written)
# when the code is not the owner's (or no longer has this name).
SET_REBATE_RATE = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], 'rebate_rate')
else redis.call('HSET', KEYS[1], 'rebate_rate', ARGV[2]) end
redis.call('HSET', KEYS[1], 'proof', ARGV[3], 'updated_ms', ARGV[4])
return 1
"""

# KEYS: outbox, outbox_records, referrals, referral_removals; ARGV: the entry (4), user, the referral edge as Python
# read it. Returns 'removed', 'changed' (the edge is not that one any more: read again) or 'stale'. It stands on the
# use that made the referral (outbox_build_on: undone after this, the use would leave the warehouse the removal of a
# referral it never had), and is the user's pending removal, which a new use of the user carries (USE_CODE).
REMOVE_REFERRAL = (
    _OUTBOX
    + """
if outbox_stale() then return 'stale' end
if redis.call('HGET', KEYS[3], ARGV[5]) ~= ARGV[6] then return 'changed' end
redis.call('HDEL', KEYS[3], ARGV[5])
local use = cjson.decode(ARGV[6]).use
outbox_build_on(type(use) == 'string' and use or nil)
redis.call('HSET', KEYS[4], ARGV[5], ARGV[1])
outbox_add()
return 'removed'
"""
)

# KEYS: outbox, outbox_records, referrals, referral_removals; ARGV: entry id, due, user, the edge removed. Puts it
# back. (Nobody referred the user since: that use would have made the removal stand. Should the user be referred all
# the same, the removal stands and is published: its entry due at once, it returns 0.)
UNDO_REMOVE_REFERRAL = (
    _OUTBOX
    + """
if not outbox_own() then return 0 end
if redis.call('HSETNX', KEYS[3], ARGV[3], ARGV[4]) == 0 then
  redis.call('ZADD', KEYS[1], 'XX', 0, ARGV[1])
  return 0
end
if redis.call('HGET', KEYS[4], ARGV[3]) == ARGV[1] then redis.call('HDEL', KEYS[4], ARGV[3]) end
outbox_remove()
return 1
"""
)

# KEYS: outbox, outbox_records, referral_removals; ARGV: entry id, user. A removal published by its request: its entry
# goes, and so does its mark, if still the user's.
REFERRAL_REMOVAL_PUBLISHED = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('HGET', KEYS[3], ARGV[2]) == ARGV[1] then redis.call('HDEL', KEYS[3], ARGV[2]) end
return 1
"""


@dataclass(frozen=True)
class Scripts:
    delete_project: AsyncScript
    revoke_key: AsyncScript
    ack_key_change: AsyncScript
    create_affiliate: AsyncScript
    undo_affiliate: AsyncScript
    create_codes: AsyncScript
    undo_codes: AsyncScript
    owner_codes: AsyncScript
    code_by_name: AsyncScript
    read_codes: AsyncScript
    set_max_uses: AsyncScript
    referrer_chains: AsyncScript
    use_code: AsyncScript
    undo_use: AsyncScript
    claim_batch: AsyncScript
    commit_batch: AsyncScript
    abort_batch: AsyncScript
    mark_processed: AsyncScript
    release_claims: AsyncScript
    register_claim_checks: AsyncScript
    update_claim_checks: AsyncScript
    undo_claim_checks: AsyncScript
    outbox_due_now: AsyncScript
    outbox_delete: AsyncScript
    outbox_lease: AsyncScript
    outbox_touch: AsyncScript
    outbox_index: AsyncScript
    outbox_forget_project: AsyncScript
    create_affiliate_code: AsyncScript
    undo_affiliate_code: AsyncScript
    rename_affiliate_code: AsyncScript
    undo_rename_affiliate_code: AsyncScript
    set_rebate_rate: AsyncScript
    remove_referral: AsyncScript
    undo_remove_referral: AsyncScript
    referral_removal_published: AsyncScript

    @classmethod
    def register(cls, redis: RedisClient) -> "Scripts":
        sources = {
            "delete_project": DELETE_PROJECT,
            "revoke_key": REVOKE_KEY,
            "ack_key_change": ACK_KEY_CHANGE,
            "create_affiliate": CREATE_AFFILIATE,
            "undo_affiliate": UNDO_AFFILIATE,
            "create_codes": CREATE_CODES,
            "undo_codes": UNDO_CODES,
            "owner_codes": OWNER_CODES,
            "code_by_name": CODE_BY_NAME,
            "read_codes": READ_CODES,
            "set_max_uses": SET_MAX_USES,
            "referrer_chains": REFERRER_CHAINS,
            "use_code": USE_CODE,
            "undo_use": UNDO_USE,
            "claim_batch": CLAIM_BATCH,
            "commit_batch": COMMIT_BATCH,
            "abort_batch": ABORT_BATCH,
            "mark_processed": MARK_PROCESSED,
            "release_claims": RELEASE_CLAIMS,
            "register_claim_checks": REGISTER_CLAIM_CHECKS,
            "update_claim_checks": UPDATE_CLAIM_CHECKS,
            "undo_claim_checks": UNDO_CLAIM_CHECKS,
            "outbox_due_now": OUTBOX_DUE_NOW,
            "outbox_delete": OUTBOX_DELETE,
            "outbox_lease": OUTBOX_LEASE,
            "outbox_touch": OUTBOX_TOUCH,
            "outbox_index": OUTBOX_INDEX,
            "outbox_forget_project": OUTBOX_FORGET_PROJECT,
            "create_affiliate_code": CREATE_AFFILIATE_CODE,
            "undo_affiliate_code": UNDO_AFFILIATE_CODE,
            "rename_affiliate_code": RENAME_AFFILIATE_CODE,
            "undo_rename_affiliate_code": UNDO_RENAME_AFFILIATE_CODE,
            "set_rebate_rate": SET_REBATE_RATE,
            "remove_referral": REMOVE_REFERRAL,
            "undo_remove_referral": UNDO_REMOVE_REFERRAL,
            "referral_removal_published": REFERRAL_REMOVAL_PUBLISHED,
        }
        return cls(**{name: redis.register_script(source) for name, source in sources.items()})
