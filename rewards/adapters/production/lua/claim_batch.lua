-- KEYS: the idempotency hash, then the dedup key of each event; ARGV: token, pending TTL (ms),
-- '1' when an Idempotency-Key is given, its body hash.
-- Returns {'conflict'} | {'replay', response} | {'busy', indexes pending by others, the others' tokens} |
-- {'claimed', fresh indexes} (indexes 0-based). Nothing is written unless the whole batch is claimed.
local token, ttl = ARGV[1], ARGV[2]
if ARGV[3] == '1' then
  local stored = redis.call('HMGET', KEYS[1], 'body_hash', 'response')
  if stored[2] then
    if stored[1] ~= ARGV[4] then return {'conflict'} end
    return {'replay', stored[2]}
  end
  if stored[1] then return {'busy', {}, {redis.call('HGET', KEYS[1], 'token') or ''}} end
end
local fresh, busy, seen, tokens, named = {}, {}, {}, {}, {}
for i = 2, #KEYS do
  if not seen[KEYS[i]] then
    seen[KEYS[i]] = true
    local status = redis.call('GET', KEYS[i])
    if not status then fresh[#fresh + 1] = i - 2
    elseif status ~= 'accepted' and status ~= 'processed' and status ~= 'failed' then
      busy[#busy + 1] = i - 2
      local other = string.sub(status, 9)  -- 'pending:<token>'
      if not named[other] then named[other] = true; tokens[#tokens + 1] = other end
    end
  end
end
if #busy > 0 then return {'busy', busy, tokens} end
for _, index in ipairs(fresh) do redis.call('SET', KEYS[index + 2], 'pending:' .. token, 'PX', ttl) end
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'body_hash', ARGV[4], 'token', token)
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return {'claimed', fresh}
