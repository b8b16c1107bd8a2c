-- KEYS: the released tokens (zset: token → ms), the paid counters (hash: currency → units), the all-time counters
-- (hash). ARGV: the token, now (ms), how long a token is remembered (ms), the prefix of the month counters' keys, then
-- per counter given back: its kind ('paid', 'total' or 'month:<YYYY-MM>'), its field, the units (decimal text).
-- A reversal's units back to caps and budgets (API.md §9), once per token: each counter that exists drops by them,
-- never below 0. Returns 1 when this call gave them back.
--#include include/bignum.lua
local released, paid, totals = KEYS[1], KEYS[2], KEYS[3]
local token, now, kept, prefix = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', released, '-inf', string.format('%d', now - kept))
if redis.call('ZADD', released, 'NX', string.format('%d', now), token) == 0 then return 0 end
for i = 5, #ARGV, 3 do
  local kind, field, units = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local key = totals
  if kind == 'paid' then key = paid elseif kind ~= 'total' then key = prefix .. kind end
  local current = redis.call('HGET', key, field)
  if current then redis.call('HSET', key, field, sub(current, units)) end
end
return 1
