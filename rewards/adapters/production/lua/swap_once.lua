-- KEYS: the calls' answers (hash: token → answer), their times (zset: token → ms), then the string keys to swap (claim
-- checks, debts). ARGV: the token, now (ms), how long an answer is kept (ms), the answer, then per key the value read
-- ('' none) and the value to write ('' delete).
-- Once per token and all or none: returns {'kept', answer} for a token seen before, {'changed'} when a key is not as
-- read (nothing written: read again), else writes them and returns {'done', answer}.
local calls, calls_at = KEYS[1], KEYS[2]
local kept = redis.call('HGET', calls, ARGV[1])
if kept then return {'kept', kept} end
local stale = redis.call('ZRANGEBYSCORE', calls_at, '-inf', string.format('%d', tonumber(ARGV[2]) - tonumber(ARGV[3])),
  'LIMIT', 0, 256)
for _, token in ipairs(stale) do redis.call('HDEL', calls, token); redis.call('ZREM', calls_at, token) end
for i = 3, #KEYS do
  if (redis.call('GET', KEYS[i]) or '') ~= ARGV[2 * i - 1] then return {'changed'} end
end
for i = 3, #KEYS do
  local after = ARGV[2 * i]
  if after == '' then redis.call('DEL', KEYS[i]) else redis.call('SET', KEYS[i], after) end
end
redis.call('HSET', calls, ARGV[1], ARGV[4])
redis.call('ZADD', calls_at, ARGV[2], ARGV[1])
return {'done', ARGV[4]}
