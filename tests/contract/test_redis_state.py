"""The Redis adapter's own tests, beyond the contract of each port (test_<port>_store.py): what its shape
(scripts, claims pending until their block ends, one cluster slot per project, lost replies) must get right. Run on
one node, and with `-m cluster` on a Redis Cluster too."""

import asyncio
from dataclasses import replace

import pytest
import redis
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError

from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_state import BatchInFlight, RedisStateStore
from rewards.adapters.production.redis_state import ingest as redis_ingest
from rewards.domain import claim_checks as cc
from rewards.domain.payouts import User
from rewards.domain.referrals import InvalidReferral
from rewards.ports import StateStore
from tests.contract.support import (
    CLUSTER,
    Boom,
    affiliate,
    assert_implements,
    batch,
    check,
    create_codes,
    ingest,
    port_methods,
    user,
)


@pytest.fixture(params=["redis", CLUSTER])
def redis_kind(request) -> str:
    return request.param


@pytest.fixture
def rstore(request, redis_kind) -> RedisStateStore:
    """The Redis store (the Redis-only tests), on one node and with `-m cluster` on a cluster."""
    return request.getfixturevalue(f"{redis_kind}_store")


@pytest.fixture
async def rpid(rstore) -> str:
    return await rstore.create_project("contract")


def test_redis_store_has_every_method_of_the_port():
    assert {"ingest", "project_exists", "ping"} <= set(port_methods(StateStore))
    assert_implements(RedisStateStore, StateStore)


def test_project_keys_share_one_cluster_slot():
    k = ProjectKeys("0123456789abcdef0123456789abcdef")
    keys = [
        k.project(), k.config(), k.affiliates(), k.code_seq(), k.code("ABC1234"), k.code_uses("ABC1234"),
        k.owner_codes(User("a:{b}", "email")), k.referrals(), k.dedup("{x}:y"), k.user_events(user(1)),
        k.idempotency("}{"), k.claim_check("cc_1"), k.outbox(), k.outbox_records(),
    ]  # fmt: skip
    assert len({key_slot(key.encode()) for key in keys}) == 1
    assert len(set(keys)) == len(keys)


async def test_pending_claims_read_as_not_found_and_expire(rstore, rpid, monkeypatch):
    monkeypatch.setattr(redis_ingest, "PENDING_TTL_S", 0.2)
    stalled = rstore.ingest(rpid, *batch("x-1", "x-2"), ("key-x", "hash-a"))
    assert (await stalled.__aenter__()).fresh == [0, 1]
    assert await rstore.event_status(rpid, "x-1") is None
    await asyncio.sleep(0.3)
    retry = rstore.ingest(rpid, *batch("x-1", "x-2"), ("key-x", "hash-a"))
    claim = await retry.__aenter__()
    assert claim.fresh == [0, 1]
    failure = Boom()  # the stalled request fails at last: its undo must spare the retry's claims
    assert await stalled.__aexit__(Boom, failure, None) is False
    claim.respond(b"{}")
    await retry.__aexit__(None, None, None)
    assert [await rstore.event_status(rpid, i) for i in ("x-1", "x-2")] == ["accepted"] * 2
    assert (await ingest(rstore, rpid, *batch("x-1"), ("key-x", "hash-a"))).replay == b"{}"


async def test_overlapping_batch_in_flight(rstore, rpid):
    async with rstore.ingest(rpid, *batch("f-1", "f-2"), ("key-f", "hash-a")) as first:
        assert first.fresh == [0, 1]
        with pytest.raises(BatchInFlight) as raised:
            await ingest(rstore, rpid, *batch("f-3", "f-2", "f-1"))
        assert raised.value.dedup_ids == ["f-2", "f-1"]
        with pytest.raises(BatchInFlight):  # the same Idempotency-Key, still in flight
            await ingest(rstore, rpid, *batch("f-4"), ("key-f", "hash-a"))
        assert await rstore.event_status(rpid, "f-3") is None
        first.respond(b"first")
    assert (await ingest(rstore, rpid, *batch("f-3", "f-2", "f-1"))).fresh == [0]
    assert (await ingest(rstore, rpid, *batch("f-4"), ("key-f", "hash-a"))).replay == b"first"


async def test_concurrent_ingest_accepts_each_id_once(rstore, rpid):
    ids = [f"c-{n}" for n in range(40)]
    accepted: list[str] = []

    async def send(order: list[str]) -> None:
        while True:
            try:
                async with rstore.ingest(rpid, *batch(*order), None) as claim:
                    await asyncio.sleep(0.005)  # the publication
                    accepted.extend(order[i] for i in claim.fresh)
                    return
            except BatchInFlight:
                await asyncio.sleep(0.001)

    await asyncio.gather(*(send(ids[n:] + ids[:n]) for n in range(0, 40, 8)))
    assert sorted(accepted) == sorted(ids)


async def test_use_code_rechecks_what_changed_after_its_check(rstore, rpid, monkeypatch):
    [of_one], [of_two] = await create_codes(rstore, rpid, user(1)), await create_codes(rstore, rpid, user(2))
    read_chains, raced = rstore.referrer_chains, []

    async def chains_then_race(project_id, users, depth):
        chains = await read_chains(project_id, users, depth)
        if not raced:  # between the check and the write, 1 becomes referred by 2
            raced.append(True)
            async with rstore.use_code(rpid, of_two, user(1), {}):
                pass
        return chains

    monkeypatch.setattr(rstore, "referrer_chains", chains_then_race)
    with pytest.raises(InvalidReferral, match="cycle"):
        async with rstore.use_code(rpid, of_one, user(2), {}):
            pass
    assert raced and (await rstore.get_code(rpid, of_one)).current_uses == 0
    assert await rstore.referral_of(rpid, user(2)) is None


async def test_claim_check_update_retries_after_a_concurrent_change(rstore, rpid, request, redis_kind):
    a = check(rpid, 1, user(1))
    await rstore.register_claim_checks(rpid, [a])
    attempts = []

    def close_after_a_concurrent_close(c: cc.ClaimCheck) -> cc.ClaimCheck:
        if not attempts:  # another instance closes the check between our read and our write
            with _other_client(request, redis_kind) as other:
                other.set(ProjectKeys(rpid).claim_check(a.id), cc.to_record(rpid, cc.close(c)).model_dump_json())
        attempts.append(c.status)
        return cc.close(c)

    async with rstore.update_claim_checks(rpid, [a.id], close_after_a_concurrent_close, None) as closed:
        assert (closed.value[0].status, closed.value[0].version) == (cc.CLOSED, 2)
    assert attempts == [cc.OPEN, cc.CLOSED]


def _other_client(request, redis_kind: str):
    """A synchronous client of the store's Redis (another instance of the service, say)."""
    if redis_kind == "cluster":
        return redis.RedisCluster.from_url(request.getfixturevalue("redis_cluster_url"))
    return redis.Redis.from_url(request.getfixturevalue("redis_url"))


def reply_lost(apply):
    async def call(*args, **kwargs):
        await apply(*args, **kwargs)
        raise RedisConnectionError("Connection reset by peer")

    return call


async def test_a_change_whose_reply_is_lost_is_undone(rstore, rpid, monkeypatch):
    [code] = await create_codes(rstore, rpid, user(1), 1, 1)
    scripts = rstore._scripts
    lossy = replace(
        scripts,
        use_code=reply_lost(scripts.use_code),
        claim_batch=reply_lost(scripts.claim_batch),
        create_affiliate=reply_lost(scripts.create_affiliate),
    )
    monkeypatch.setattr(rstore, "_scripts", lossy)
    with pytest.raises(RedisConnectionError):
        async with rstore.use_code(rpid, code, user(2), {}):
            pass
    with pytest.raises(RedisConnectionError):
        await ingest(rstore, rpid, *batch("l-1"), ("key-l", "hash-a"))
    with pytest.raises(RedisConnectionError):
        async with rstore.create_affiliate(rpid, affiliate(1)):
            pass
    monkeypatch.undo()
    record = await rstore.get_code(rpid, code)
    assert (record.current_uses, record.used_by, await rstore.referral_of(rpid, user(2))) == (0, [], None)
    assert (await ingest(rstore, rpid, *batch("l-1"), ("key-l", "hash-a"))).fresh == [0]
    assert await rstore.get_affiliate(rpid, user(1)) is None
    assert await rstore._redis.zcard(ProjectKeys(rpid).outbox()) == 0  # the undo took the entries too


async def test_processed_while_pending_stays_processed(rstore, rpid):
    async with rstore.ingest(rpid, *batch("w-1", "w-2"), None):
        await rstore.mark_processed(rpid, ["w-1"])  # a fast worker, before the commit
    assert [await rstore.event_status(rpid, i) for i in ("w-1", "w-2")] == ["processed", "accepted"]


async def test_failed_while_pending_stays_failed(rstore, rpid):
    async with rstore.ingest(rpid, *batch("x-1"), None):
        await rstore.mark_failed(rpid, ["x-1"])
    assert await rstore.event_status(rpid, "x-1") == "failed"
