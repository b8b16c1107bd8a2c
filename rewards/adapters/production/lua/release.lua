-- KEYS: the paid counters (hash: currency → units), the released claim checks (zset: check id → ms).
-- ARGV: the check's id, its currency, its units, now (ms), how long a release is remembered (ms).
-- An expired claim check's amount back to its currency's budget (API.md §8), once per check: the paid counter drops
-- by it (never below 0), if the currency has one. Returns 1 when this call released it.
--#include include/bignum.lua
local paid, released = KEYS[1], KEYS[2]
local id, cur, units, now, kept = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', released, '-inf', string.format('%d', now - kept))
if redis.call('ZADD', released, 'NX', string.format('%d', now), id) == 0 then return 0 end
local current = redis.call('HGET', paid, cur)
if current then redis.call('HSET', paid, cur, sub(current, units)) end
return 1
