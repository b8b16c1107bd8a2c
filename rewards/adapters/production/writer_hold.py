"""Holding every worker process's writes still for a moment (an erasure's copy-and-swap of the warehouse's tables:
stream_workers.erasures), on Redis, in a slot of its own (`{writers}`).

A worker takes a lease before writing each delivery (`writing`): refused while the hold is set, so it waits; a lease
ends when its write does. Whoever holds (`held`) sets the hold, then waits until no lease is left: from then on, and
until it lets go, nothing writes the warehouse. Both are renewed every third of their time while their owner lives
(LEASE_MS, HOLD_MS), so a dead worker's lease, or a dead holder's hold, ends within that time, and a live one never
ends early; before each swap the holder confirms the hold is still its own (`Held.confirm`). Times are Redis's own
clock (TIME), so the processes' clocks never matter.

Why not a lock of the redis library: a reader-writer lock is what is needed (many writers at once, one holder
excluding them all), with the writers' leases visible to the holder; it is two keys and a few short scripts.
"""

import asyncio
import contextlib
import time
import uuid
from contextlib import asynccontextmanager

from rewards.adapters.production.redis_client import RedisClient
from rewards.adapters.production.redis_keys import PREFIX
from rewards.ports import WritersHeldElsewhere

HOLD = f"{PREFIX}:{{writers}}:hold"
LEASES = f"{PREFIX}:{{writers}}:leases"
LEASE_MS = 60_000
HOLD_MS = 60_000
WAIT_S = 0.2

_NOW = "local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)"
# KEYS: the hold, the leases. ARGV: the lease's member, its time (ms). 1: leased (or renewed); 0: held, wait.
_LEASE = f"""{_NOW}
if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('ZSCORE', KEYS[2], ARGV[1]) == false then return 0 end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
return 1
"""
# KEYS: the hold, the leases. ARGV: the holder's token, the hold's time (ms). {the leases still running (0: none, so
# the hold is whole), the leases that ended by their time now}, or {-1, 0} when another holder has the hold.
_HOLD = f"""{_NOW}
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return {{-1, 0}} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local pruned = redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
return {{redis.call('ZCARD', KEYS[2]), pruned}}
"""
# KEYS: the hold. ARGV: the token, the hold's time (ms). 1: still the holder's (renewed), 0: lost.
# KEYS: the leases. The leases ended by their time, dropped.
_PRUNE = f"""{_NOW}
return redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
"""
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""


class HoldLost(Exception):
    """The hold ended before the holder let go (Redis unreachable past HOLD_MS): what it did not swap yet is left, and
    the round fails (it is retried)."""


class LeaseLost(Exception):
    """A worker's lease was not renewed for half its time (Redis unreachable, the process stalled): the holder may
    count it gone soon, so the write stops here, to be retried under a new lease."""


class Lease:
    """A worker's lease on writing: `ensure()` before each write into the warehouse."""

    def __init__(self, lease_ms: int, renew):
        self.lease_ms = lease_ms
        self.renewed = time.monotonic()
        self.lost = False
        self._renew = renew

    async def ensure(self) -> None:
        """Return at once if the lease was renewed within half its time; else renew it now (a busy process's renewal
        task may run late), raising LeaseLost if it is gone (a holder pruned it and holds the writers)."""
        stale = self.lost or time.monotonic() - self.renewed > self.lease_ms / 2000
        if stale and not await self._renew():
            raise LeaseLost("the writer's lease ended and the writers are held")


class Held:
    def __init__(self, renew):
        self._renew = renew

    async def confirm(self) -> None:
        """Raise HoldLost unless the hold is still this holder's (and renew it)."""
        if not await self._renew():
            raise HoldLost("the writers' hold ended before the round did")


class RedisWriterHold:
    def __init__(self, redis: RedisClient, lease_ms: int = LEASE_MS):
        self._redis = redis
        self.lease_ms = lease_ms  # REWARDS_WORKER_LEASE_S
        self._prune = redis.register_script(_PRUNE)
        self._lease = redis.register_script(_LEASE)
        self._hold = redis.register_script(_HOLD)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    @asynccontextmanager
    async def writing(self):
        """A worker's lease for one delivery's write (a Lease, to `ensure()` before each insert): waits while the
        writers are held; renewed while it writes, and by `ensure()` when its renewals ran late (LeaseLost if it is
        gone meanwhile)."""
        member = uuid.uuid4().hex

        async def renew() -> bool:
            if await self._lease(keys=[HOLD, LEASES], args=[member, self.lease_ms]) == 1:
                lease.renewed, lease.lost = time.monotonic(), False
                return True
            lease.lost = True
            return False

        lease = Lease(self.lease_ms, renew)

        while not await renew():
            lease.lost = False
            await asyncio.sleep(WAIT_S)
        renewing = asyncio.create_task(self._every(self.lease_ms, renew))
        try:
            yield lease
        finally:
            await _stop(renewing)
            await self._redis.zrem(LEASES, member)

    @asynccontextmanager
    async def held(self, wait_s: float | None = None):
        """Every writer held still until the block ends (it gets a Held, to confirm the hold before each step that must
        not run without it); WritersHeldElsewhere if another holder has them, TimeoutError if the writes under way did
        not end within `wait_s` (by default a minute and a lease's time, so that a dead worker's lease ends meanwhile;
        the hold is let go either way). A lease that ended by its time (its worker dead or cut off) is given a lease's
        time more: a write it started while its lease held ends or fails meanwhile (a worker cut off from Redis makes
        no insert once its lease went unrenewed for half that time: Lease.ensure cannot renew it); one that ended
        before the hold is set is waited for without holding anyone."""
        token = uuid.uuid4().hex

        async def renew() -> bool:
            return await self._renew(keys=[HOLD], args=[token, HOLD_MS]) == 1

        renewing = asyncio.create_task(self._every(HOLD_MS, renew))
        try:
            if await self._prune(keys=[LEASES]):  # a dead worker's lease: wait for what it wrote, writers still free
                await asyncio.sleep(self.lease_ms / 1000)
            pruned = 0
            async with asyncio.timeout(60 + self.lease_ms / 1000 if wait_s is None else wait_s):
                while (answer := await self._hold(keys=[HOLD, LEASES], args=[token, HOLD_MS]))[0] != 0:
                    if answer[0] == -1:
                        raise WritersHeldElsewhere
                    pruned += answer[1]
                    await asyncio.sleep(WAIT_S)
                pruned += answer[1]
            if pruned:
                await asyncio.sleep(self.lease_ms / 1000)
            yield Held(renew)
        finally:
            await _stop(renewing)
            await self._release(keys=[HOLD], args=[token])

    async def _every(self, period_ms: int, renew) -> None:
        while True:
            await asyncio.sleep(period_ms / 3000)
            with contextlib.suppress(Exception):  # a renewal missed is tried again; confirm() says if it was lost
                await renew()

    async def close(self) -> None:
        return None  # the client is the state store's, closed with it


async def _stop(task: asyncio.Task | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
