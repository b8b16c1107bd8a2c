"""Per-key, per-operation limits over a sliding one-minute window (API.md §0), by the `limits` library.

The embedded default keeps the windows in memory; the production shape passes a Redis storage URI so
that every ingest process shares them.
"""

import math
import time

from limits import RateLimitItem, parse
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string

DEFAULT_LIMITS = {
    "events_batch": "10/minute",
    "events_single": "100/minute",
    "payouts_summary": "100/minute",
    "referral_codes_create": "60/minute",
    "claim_history": "100/minute",
}


class RateLimited(Exception):
    def __init__(self, headers: dict[str, str]):
        super().__init__("Too Many Requests")
        self.headers = headers


class RateLimiter:
    def __init__(
        self, overrides: dict[str, str] | None = None, storage_uri: str = "async+memory://", **storage_options
    ):
        self._items: dict[str, RateLimitItem] = {
            op: parse(spec) for op, spec in {**DEFAULT_LIMITS, **(overrides or {})}.items()
        }
        self._limiter = MovingWindowRateLimiter(storage_from_string(storage_uri, **storage_options))

    async def hit(self, operation: str, key_id: str) -> dict[str, str]:
        """Count one call; return the headers to send, or raise RateLimited."""
        item = self._items[operation]
        allowed = await self._limiter.hit(item, key_id, operation)
        stats = await self._limiter.get_window_stats(item, key_id, operation)
        headers = {"X-RateLimit-Limit": str(item.amount), "X-RateLimit-Remaining": str(stats.remaining)}
        if not allowed:
            headers["Retry-After"] = str(max(1, math.ceil(stats.reset_time - time.time())))
            raise RateLimited(headers)
        return headers
