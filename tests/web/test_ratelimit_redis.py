"""The production limiter's one-script hit (rewards.web.ratelimit.HIT) is the `limits` library's moving window:
the same answers and headers, call by call, and the same keys (a window shared with the library's own calls)."""

import math
import time
import uuid

from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string
from redis.asyncio import Redis

from rewards.web.ratelimit import RateLimited, RateLimiter


class LibraryLimiter(RateLimiter):
    """Today's path before the script: the library's two calls on Redis (acquire, then read the window)."""

    def __init__(self, overrides: dict[str, str], redis_url: str):
        super().__init__(overrides)
        self._limiter = MovingWindowRateLimiter(storage_from_string("async+" + redis_url, implementation="redispy"))


async def _answer(limiter: RateLimiter, operation: str, key_id: str) -> tuple[bool, dict[str, str]]:
    try:
        return True, await limiter.hit(operation, key_id)
    except RateLimited as exc:
        return False, exc.headers


async def test_the_script_answers_as_the_library_call_by_call(redis_url, monkeypatch):
    """Both read the client's clock (time.time): a fake one, so that both see the very same times."""
    now = [1_800_000_000.123456]
    monkeypatch.setattr(time, "time", lambda: now[0])
    redis = Redis.from_url(redis_url, decode_responses=True)
    overrides = {"events_batch": "3/2 seconds", "events_single": "0/minute"}
    script, library = RateLimiter(overrides, redis=redis), LibraryLimiter(overrides, redis_url)
    ours, theirs = f"a{uuid.uuid4().hex}", f"b{uuid.uuid4().hex}"
    try:
        for pause in (0, 0.01, 0.02, 0.3, 0.97, 0, 0.75, 0.001, 0.3, 1.2, 2.1, 0, 0.5, 0.25):
            now[0] += pause
            got, expected = await _answer(script, "events_batch", ours), await _answer(library, "events_batch", theirs)
            assert got == expected
        assert await _answer(script, "events_single", ours) == await _answer(library, "events_single", theirs)
        assert (await _answer(script, "events_single", ours))[1] == {
            "X-RateLimit-Limit": "0", "X-RateLimit-Remaining": "0", "Retry-After": "60"
        }  # fmt: skip
    finally:
        await redis.aclose()


async def test_the_script_and_the_library_share_one_window(redis_url):
    redis = Redis.from_url(redis_url, decode_responses=True)
    overrides = {"events_batch": "4/minute"}
    script, library = RateLimiter(overrides, redis=redis), LibraryLimiter(overrides, redis_url)
    key_id = uuid.uuid4().hex
    try:
        started = time.time()
        answers = [await _answer(limiter, "events_batch", key_id) for limiter in (script, library) * 3]
        assert [allowed for allowed, _ in answers] == [True] * 4 + [False] * 2
        assert [headers["X-RateLimit-Remaining"] for _, headers in answers] == ["3", "2", "1", "0", "0", "0"]
        retry_after = int(answers[-1][1]["Retry-After"])
        assert math.ceil(60 - (time.time() - started)) - 1 <= retry_after <= 60
    finally:
        await redis.aclose()
