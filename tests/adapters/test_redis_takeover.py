"""An ingest process killed mid-batch leaves its claims pending (issue 32, 5a): once its successor has retired its
epoch (runtime.wiring.retire_predecessor: its Kafka transactions fenced, what it published written), a retry of the
batch on any process takes the claims over at once instead of meeting 503s for PENDING_TTL_S; claims of a process
not retired stay its own. On a real Redis; tests/runtime/test_production_faults.py kills a real ingest process."""

import asyncio

import pytest

from rewards.adapters.production.redis_state import BatchInFlight, open_redis_state
from tests.contract.support import batch, ingest, redis_url  # noqa: F401 (redis_url: a fixture)


@pytest.fixture
async def stores(redis_url):  # noqa: F811
    dead, survivor = await open_redis_state(redis_url), await open_redis_state(redis_url)
    yield dead, survivor
    await dead.close()
    await survivor.close()


async def in_flight(store, pid: str, ids: list[str], idempotency=None) -> tuple[asyncio.Task, asyncio.Event]:
    """A batch claimed and never finished (its process died inside its block)."""
    claimed, never = asyncio.Event(), asyncio.Event()

    async def hold():
        async with store.ingest(pid, *batch(*ids), idempotency):
            claimed.set()
            await never.wait()

    task = asyncio.create_task(hold())
    await claimed.wait()
    return task, never


@pytest.mark.parametrize("idempotency", [None, ("retry-key", "hash-1")])
async def test_claims_of_a_retired_process_are_taken_over_at_once(stores, idempotency):
    dead, survivor = stores
    pid = await survivor.create_project("takeover")
    task, _ = await in_flight(dead, pid, ["t-1", "t-2"], idempotency)
    with pytest.raises(BatchInFlight):
        await ingest(survivor, pid, *batch("t-1", "t-2"), idempotency)
    await survivor.retire_epoch(dead.epoch)
    assert (await ingest(survivor, pid, *batch("t-1", "t-2", "t-3"), idempotency)).fresh == [0, 1, 2]
    assert await survivor.event_status(pid, "t-1") == "accepted"
    task.cancel()  # the dead block's undo finds none of its claims any more: the survivor's stand
    await asyncio.gather(task, return_exceptions=True)
    assert await survivor.event_status(pid, "t-1") == "accepted"


async def test_claims_of_a_live_process_stay_its_own(stores):
    live, other = stores
    pid = await other.create_project("live")
    task, never = await in_flight(live, pid, ["l-1"])
    await other.retire_epoch("someone-else")
    with pytest.raises(BatchInFlight):
        await ingest(other, pid, *batch("l-1"))
    never.set()
    await task
    assert (await ingest(other, pid, *batch("l-1"))).fresh == []  # the live one's batch was accepted: a duplicate


async def test_a_process_taking_over_an_owner_learns_its_predecessors_epoch(stores):
    first, second = stores
    owner = f"rewards-ingest-test-{first.epoch}-0"
    assert await first.take_over_owner(owner) is None
    assert await second.take_over_owner(owner) == first.epoch
