"""Lua scripts of the Redis state store: each one changes several keys of one project atomically.

They only guard and apply; the domain rules stay in Python (rewards.domain), which reads first and
decides, and a script re-checks whatever a concurrent request could have changed in between.
"""

from dataclasses import dataclass

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

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

DELETE_PROJECT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('HSETNX', KEYS[1], 'deleted_ms', ARGV[1])
"""

HDEL_IF_EQUAL = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""

# KEYS: code_seq, owner_codes, code hash of each candidate; ARGV: owner, created_ms, max_uses ('' = none),
# then the candidates. Returns the candidates created (a code taken already is left out).
CREATE_CODES = """
local created = {}
for i = 3, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    local code, seq = ARGV[i + 1], redis.call('INCR', KEYS[1])
    redis.call('HSET', KEYS[i], 'owner', ARGV[1], 'created_ms', ARGV[2], 'current_uses', 0, 'seq', seq)
    if ARGV[3] ~= '' then redis.call('HSET', KEYS[i], 'max_uses', ARGV[3]) end
    redis.call('ZADD', KEYS[2], seq, code)
    created[#created + 1] = code
  end
end
return created
"""

# KEYS: owner_codes, then the code hashes; ARGV: the codes.
DELETE_CODES = """
for i = 2, #KEYS do
  redis.call('DEL', KEYS[i])
  redis.call('ZREM', KEYS[1], ARGV[i - 1])
end
return 1
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

# KEYS: code, code_uses, referrals; ARGV: user, use (JSON), referral edge (JSON), chain limit, used_by limit.
# Re-checks what may have changed since Python applied check_use; 'changed' sends Python back to re-read.
USE_CODE = (
    _CHAIN
    + """
local code = redis.call('HMGET', KEYS[1], 'owner', 'max_uses', 'current_uses')
if not code[1] then return {'changed'} end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return {'changed'} end
local _, above_owner = chain(KEYS[3], code[1], tonumber(ARGV[4]))
if above_owner[ARGV[1]] then return {'changed'} end
if code[2] and tonumber(code[3]) >= tonumber(code[2]) then return {'changed'} end
redis.call('HINCRBY', KEYS[1], 'current_uses', 1)
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
return {'used', redis.call('HGETALL', KEYS[1]), redis.call('LRANGE', KEYS[2], -tonumber(ARGV[5]), -1)}
"""
)

# KEYS: code, code_uses, referrals; ARGV: the use (JSON), user, use id. Safe whether or not the use was made.
UNDO_USE = """
if redis.call('LREM', KEYS[2], -1, ARGV[1]) == 1 then redis.call('HINCRBY', KEYS[1], 'current_uses', -1) end
local edge = redis.call('HGET', KEYS[3], ARGV[2])
if edge and cjson.decode(edge).use == ARGV[3] then redis.call('HDEL', KEYS[3], ARGV[2]) end
return 1
"""

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

# KEYS: string keys; ARGV: for each key, the value written and the value to put back.
RESTORE_IF_EQUAL = """
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[2 * i - 1] then redis.call('SET', KEYS[i], ARGV[2 * i]) end
end
return 1
"""


@dataclass(frozen=True)
class Scripts:
    delete_project: AsyncScript
    hdel_if_equal: AsyncScript
    create_codes: AsyncScript
    delete_codes: AsyncScript
    referrer_chains: AsyncScript
    use_code: AsyncScript
    undo_use: AsyncScript
    claim_batch: AsyncScript
    commit_batch: AsyncScript
    abort_batch: AsyncScript
    mark_processed: AsyncScript
    release_claims: AsyncScript
    restore_if_equal: AsyncScript

    @classmethod
    def register(cls, redis: Redis) -> "Scripts":
        sources = {
            "delete_project": DELETE_PROJECT,
            "hdel_if_equal": HDEL_IF_EQUAL,
            "create_codes": CREATE_CODES,
            "delete_codes": DELETE_CODES,
            "referrer_chains": REFERRER_CHAINS,
            "use_code": USE_CODE,
            "undo_use": UNDO_USE,
            "claim_batch": CLAIM_BATCH,
            "commit_batch": COMMIT_BATCH,
            "abort_batch": ABORT_BATCH,
            "mark_processed": MARK_PROCESSED,
            "release_claims": RELEASE_CLAIMS,
            "restore_if_equal": RESTORE_IF_EQUAL,
        }
        return cls(**{name: redis.register_script(source) for name, source in sources.items()})
