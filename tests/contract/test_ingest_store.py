"""The IngestStore contract: a batch's claim of its dedup ids and Idempotency-Key, and each event's status."""

import pytest

from rewards.domain.errors import ErrorKind, IdempotencyKeyReused
from rewards.ports import IngestStore
from tests.contract.support import Boom, assert_implements, batch, ingest, user


def test_has_the_port(store: IngestStore):
    assert_implements(type(store), IngestStore)


async def test_ingest_fresh_and_duplicates(store: IngestStore, pid: str):
    claim = await ingest(store, pid, *batch("e-1", "e-2", "e-3"))
    assert (claim.replay, claim.fresh) == (None, [0, 1, 2])
    assert (await ingest(store, pid, *batch("e-2", "e-4", "e-1", "e-5"))).fresh == [1, 3]
    assert (await ingest(store, pid, *batch("e-6", "e-6", "e-2", "e-6"))).fresh == [0]
    assert (await ingest(store, pid, *batch("e-1", "e-2"))).fresh == []
    assert [await store.event_status(pid, i) for i in ("e-1", "e-5", "e-6", "e-7")] == ["accepted"] * 3 + [None]


async def test_has_event(store: IngestStore, pid: str):
    assert not await store.has_event(pid, user(2), "signup")
    await ingest(store, pid, *batch("u-1", name="signup"))
    assert await store.has_event(pid, user(2), "signup")
    assert not await store.has_event(pid, user(2), "purchase")
    assert not await store.has_event(pid, user(3), "signup")


async def test_event_status_through_processed(store: IngestStore, pid: str):
    await ingest(store, pid, *batch("p-1", "p-2"))
    await store.mark_processed(pid, ["p-1", "p-9"])
    await store.mark_processed(pid, [])
    statuses = [await store.event_status(pid, i) for i in ("p-1", "p-2", "p-9")]
    assert statuses == ["processed", "accepted", None]
    assert (await ingest(store, pid, *batch("p-1", "p-9"))).fresh == [1]
    assert await store.event_status(pid, "p-1") == "processed"
    assert await store.processed_among(pid, ["p-1", "p-2", "p-9", "nope"]) == {"p-1"}
    assert await store.processed_among(pid, []) == set()


async def test_an_event_set_aside_is_failed_and_stays_known(store: IngestStore, pid: str):
    await ingest(store, pid, *batch("f-1", "f-2"))
    await store.mark_failed(pid, ["f-1", "f-9"])
    await store.mark_failed(pid, [])
    assert [await store.event_status(pid, i) for i in ("f-1", "f-2", "f-9")] == ["failed", "accepted", None]
    assert (await ingest(store, pid, *batch("f-1", "f-3"))).fresh == [1]  # still a duplicate
    assert await store.processed_among(pid, ["f-1", "f-2"]) == {"f-1"}  # published again: not handled twice


async def test_idempotent_replay_and_conflict(store: IngestStore, pid: str, other_pid: str):
    first = await ingest(store, pid, *batch("i-1", "i-2"), ("key-1", "hash-a"), b'{"ingested_events":2}')
    assert first.fresh == [0, 1]
    replay = await ingest(store, pid, *batch("i-1", "i-2"), ("key-1", "hash-a"))
    assert (replay.replay, replay.fresh) == (b'{"ingested_events":2}', [])
    with pytest.raises(IdempotencyKeyReused) as raised:
        await ingest(store, pid, *batch("i-3"), ("key-1", "hash-b"))
    assert raised.value.kind is ErrorKind.CONFLICT
    assert await store.event_status(pid, "i-3") is None
    assert (await ingest(store, other_pid, *batch("i-1"), ("key-1", "hash-b"))).fresh == [0]  # keys are per project


async def test_idempotency_key_without_response_is_not_kept(store: IngestStore, pid: str):
    async with store.ingest(pid, *batch("n-1"), ("key-n", "hash-a")) as claim:
        assert claim.fresh == [0]
    assert (await ingest(store, pid, *batch("n-2"), ("key-n", "hash-b"))).fresh == [0]


async def test_ingest_undone_when_block_raises(store: IngestStore, pid: str):
    await ingest(store, pid, *batch("r-1"))
    with pytest.raises(Boom):
        async with store.ingest(pid, *batch("r-1", "r-2", "r-3", name="deposit"), ("key-r", "hash-a")) as claim:
            assert claim.fresh == [1, 2]
            raise Boom
    assert [await store.event_status(pid, i) for i in ("r-1", "r-2", "r-3")] == ["accepted", None, None]
    assert not await store.has_event(pid, user(3), "deposit")
    claim = await ingest(store, pid, *batch("r-1", "r-2", "r-3"), ("key-r", "hash-b"))
    assert claim.fresh == [1, 2]
