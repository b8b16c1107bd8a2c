"""The production workers' hold (rewards.adapters.production.writer_hold): a write waits while the writers are held,
a holder waits for the writes under way, one holder at a time, and a holder's end lets the writes go on."""

import asyncio

import pytest

from rewards.adapters.production.redis_client import open_redis
from rewards.adapters.production.writer_hold import HOLD, LEASES, LeaseLost, RedisWriterHold
from rewards.ports import WritersHeldElsewhere
from tests.contract.support import redis_url  # noqa: F401 (fixture)


@pytest.fixture
async def hold(redis_url):  # noqa: F811
    redis = await open_redis(redis_url)
    await redis.delete(HOLD, LEASES)
    yield RedisWriterHold(redis)
    await redis.delete(HOLD, LEASES)
    await redis.aclose()


async def test_a_holder_waits_for_the_writes_under_way_and_holds_the_next(hold: RedisWriterHold):
    events: list[str] = []
    writing = hold.writing()
    await writing.__aenter__()
    events.append("write 1 started")

    async def holder():
        async with hold.held(wait_s=5):
            events.append("held")
            await asyncio.sleep(0.3)
            events.append("let go")

    holding = asyncio.create_task(holder())
    await asyncio.sleep(0.3)
    assert events == ["write 1 started"]  # the write under way: the holder waits
    events.append("write 1 ended")
    await writing.__aexit__(None, None, None)
    await asyncio.sleep(0.3)
    assert events[-1] == "held"

    async def write():
        async with hold.writing():
            events.append("write 2")

    await asyncio.gather(holding, write())
    assert events == ["write 1 started", "write 1 ended", "held", "let go", "write 2"]


async def test_one_holder_at_a_time_and_a_write_that_never_ends_times_out(hold: RedisWriterHold):
    async with hold.held(wait_s=1):
        with pytest.raises(WritersHeldElsewhere):
            async with hold.held(wait_s=1):
                pass
    async with hold.writing():
        with pytest.raises(TimeoutError):
            async with hold.held(wait_s=0.5):
                pass
    async with hold.held(wait_s=1):  # a failed hold let go: the next one takes it
        pass


async def test_a_lease_gone_unrenewed_stops_its_writes_before_the_holder_begins(hold: RedisWriterHold, monkeypatch):
    """A worker cut off from Redis (its renewals never land): its lease's check fails after half the lease's time,
    and the holder, finding the lease ended by its time, waits a whole lease more before it begins."""
    hold.lease_ms = 400

    async def never(self, period_ms, renew):
        await asyncio.Event().wait()

    monkeypatch.setattr(RedisWriterHold, "_every", never)
    loop = asyncio.get_running_loop()
    async with hold.writing() as lease:
        await lease.ensure()  # fresh
        started = loop.time()
        async with hold.held(wait_s=5):
            waited = loop.time() - started
            with pytest.raises(LeaseLost):
                await lease.ensure()
    assert waited >= 0.4 + 0.4 - 0.05  # the lease's own time, then a whole lease more


async def test_a_dead_workers_lease_is_waited_for_without_holding_anyone(hold: RedisWriterHold, monkeypatch):
    hold.lease_ms = 300

    async def never(self, period_ms, renew):
        await asyncio.Event().wait()

    monkeypatch.setattr(RedisWriterHold, "_every", never)
    async with hold.writing():  # its worker dies: never renewed, never let go
        await asyncio.sleep(0.35)
        holding = asyncio.create_task(_hold_briefly(hold))
        await asyncio.sleep(0.1)
        assert not await hold._redis.exists(HOLD)  # waiting for the dead lease, the holder holds no one yet
        async with hold.writing():  # a live worker writes on
            pass
        await holding
    await hold._redis.zrem(LEASES, *await hold._redis.zrange(LEASES, 0, -1)) if await hold._redis.zcard(
        LEASES
    ) else None


async def _hold_briefly(hold: RedisWriterHold) -> None:
    async with hold.held(wait_s=5):
        pass
