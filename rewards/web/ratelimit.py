"""Per-key, per-operation limits over a sliding one-minute window (API.md §0), by the `limits` library.

The embedded default keeps the windows in memory; the production shape passes a Redis client (one node or a
cluster: the script touches one key) so that every ingest process shares them. On Redis a call is counted and its
window read in one script (`HIT`), which is the library's moving window (its `acquire_moving_window` and
`moving_window` scripts, on the same keys and with the same client clock, so processes of either kind share a
window), done in one round trip instead of two, and atomically: the remaining count is never another request's.
"""

import math
import time

from limits import RateLimitItem, parse
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

DEFAULT_LIMITS = {
    "events_batch": "10/minute",
    "events_single": "100/minute",
    "events_reversals": "10/minute",
    "payouts_summary": "100/minute",
    "referral_codes_create": "60/minute",
    "claim_history": "100/minute",
    "claim_forms": "100/minute",  # POST /claim-checks/claim: signs up to 1,000 forms (ours: not in API.md §0)
    "claimable_rewards": "60/minute",  # GET /claimable-rewards, per client address (API.md §9: no key)
    "dead_letters_replay": "60/minute",  # POST /dead-letters/replay: a slice of 1,000 a call (ours)
    "erasures": "60/minute",  # POST /users/erasures (ours: not in API.md §0)
    "exports": "10/minute",  # GET /exports/*: each reads a window of rows whole (ours: not in API.md §0)
}

# The `limits` library's Redis key prefix (limits.aio.storage.RedisStorage.PREFIX).
LIBRARY_PREFIX = "LIMITS"

# KEYS: the window (a list of call times, newest first, as the library keeps it); ARGV: now (s, the client's
# clock), the limit, the window (s). Counts the call unless `limit` calls lie within the window already, then
# reads the window as the library's get_window_stats does. Returns {counted (1 or 0), calls within the window,
# the oldest of them (s; '' if none)}.
HIT = """
local now, limit, expiry = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local counted = 0
if limit >= 1 then
  local entry = redis.call('LINDEX', KEYS[1], limit - 1)
  if not (entry and tonumber(entry) >= now - expiry) then
    redis.call('LPUSH', KEYS[1], now)
    redis.call('LTRIM', KEYS[1], 0, limit - 1)
    redis.call('EXPIRE', KEYS[1], expiry)
    counted = 1
  end
end
local low, high, found = 0, limit - 1, nil
while low <= high do
  local mid = math.floor((low + high) / 2)
  local value = tonumber(redis.call('LINDEX', KEYS[1], mid))
  if value and value >= now - expiry then
    found = mid
    low = mid + 1
  else
    high = mid - 1
  end
end
if found == nil then return {counted, 0, ''} end
return {counted, found + 1, tostring(tonumber(redis.call('LINDEX', KEYS[1], found)))}
"""


class RateLimited(Exception):
    def __init__(self, headers: dict[str, str]):
        super().__init__("Too Many Requests")
        self.headers = headers


class RateLimiter:
    def __init__(self, overrides: dict[str, str] | None = None, redis: Redis | RedisCluster | None = None):
        self._items: dict[str, RateLimitItem] = {
            op: parse(spec) for op, spec in {**DEFAULT_LIMITS, **(overrides or {})}.items()
        }
        self._redis = redis  # owned: closed by close()
        self._hit = None if redis is None else redis.register_script(HIT)
        self._limiter = MovingWindowRateLimiter(storage_from_string("async+memory://")) if redis is None else None

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()

    async def hit(self, operation: str, key_id: str) -> dict[str, str]:
        """Count one call; return the headers to send, or raise RateLimited."""
        item = self._items[operation]
        if self._hit is None:
            allowed = await self._limiter.hit(item, key_id, operation)
            stats = await self._limiter.get_window_stats(item, key_id, operation)
            remaining, reset = stats.remaining, stats.reset_time
        else:
            now, expiry = time.time(), item.get_expiry()
            key = f"{LIBRARY_PREFIX}:{item.key_for(key_id, operation)}"
            counted, calls, oldest = await self._hit(keys=[key], args=[now, item.amount, expiry])
            allowed, remaining = counted == 1, item.amount - int(calls)
            reset = (float(oldest) if oldest else now) + expiry
        headers = {"X-RateLimit-Limit": str(item.amount), "X-RateLimit-Remaining": str(remaining)}
        if not allowed:
            headers["Retry-After"] = str(max(1, math.ceil(reset - time.time())))
            raise RateLimited(headers)
        return headers
