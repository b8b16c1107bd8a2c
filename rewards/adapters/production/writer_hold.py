"""Holding every worker process's writes still for a moment (an erasure's copy-and-swap of the warehouse's tables:
stream_workers.erasures), on Redis, in a slot of its own (`{writers}`).

A worker takes a lease before writing each delivery (`writing`): refused while the hold is set, so it waits; a lease
ends when its write does, or after LEASE_MS if its process died. Whoever holds (`held`) sets the hold, then waits
until no lease is left: from then on, and until it lets go, nothing writes the warehouse. The hold expires by itself
after HOLD_MS, so a holder that dies never stops the pipeline for longer.

Why not a lock of the redis library: a reader-writer lock is what is needed (many writers at once, one holder
excluding them all), with the writers' leases visible to the holder; it is two keys and two short scripts.
"""

import asyncio
import time
import uuid
from contextlib import asynccontextmanager

from rewards.adapters.production.redis_client import RedisClient
from rewards.adapters.production.redis_keys import PREFIX
from rewards.ports import WritersHeldElsewhere

HOLD = f"{PREFIX}:{{writers}}:hold"
LEASES = f"{PREFIX}:{{writers}}:leases"
LEASE_MS = 300_000  # longer than any delivery's write (a write retried for longer takes a new lease each try)
HOLD_MS = 900_000  # an erasure of the largest warehouse holds a few minutes at most
WAIT_S = 0.2

# KEYS: the hold, the leases. ARGV: the lease's member, its end (ms), now (ms). 1: leased; 0: held, wait.
_LEASE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
"""
# KEYS: the hold, the leases. ARGV: the holder's token, the hold's time (ms), now (ms). The leases still running (0:
# none, so the hold is whole), or -1 when another holder has the hold.
_HOLD = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return -1 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
return redis.call('ZCARD', KEYS[2])
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""


class RedisWriterHold:
    def __init__(self, redis: RedisClient):
        self._redis = redis
        self._lease = redis.register_script(_LEASE)
        self._hold = redis.register_script(_HOLD)
        self._release = redis.register_script(_RELEASE)

    @asynccontextmanager
    async def writing(self):
        """A worker's lease for one delivery's write: waits while the writers are held."""
        member = uuid.uuid4().hex
        while not await self._lease(keys=[HOLD, LEASES], args=[member, _ms() + LEASE_MS, _ms()]):
            await asyncio.sleep(WAIT_S)
        try:
            yield
        finally:
            await self._redis.zrem(LEASES, member)

    @asynccontextmanager
    async def held(self, wait_s: float = 60.0):
        """Every writer held still until the block ends; WritersHeldElsewhere if another holder has them,
        TimeoutError if the writes under way did not end within `wait_s` (the hold is let go either way)."""
        token = uuid.uuid4().hex
        try:
            async with asyncio.timeout(wait_s):
                while (running := await self._hold(keys=[HOLD, LEASES], args=[token, HOLD_MS, _ms()])) != 0:
                    if running == -1:
                        raise WritersHeldElsewhere
                    await asyncio.sleep(WAIT_S)
            yield
        finally:
            await self._release(keys=[HOLD], args=[token])

    async def close(self) -> None:
        return None  # the client is the state store's, closed with it


def _ms() -> int:
    return int(time.time() * 1000)
