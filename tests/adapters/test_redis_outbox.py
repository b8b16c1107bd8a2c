"""The Redis state store's outbox and its relay (rewards.adapters.production.outbox_relay), on real Redis, Kafka and
ClickHouse: a process killed between a state change and its publish still gets the change to the log (and, in
the production shape, to the warehouse); a failed publish undoes change and entry together, unless the relay
has the entry already or the publish may have gone through; the relay's index forgets only idle projects."""

import asyncio
import json
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from redis.exceptions import ConnectionError as RedisConnectionError

from rewards.adapters.production import kafka_log, outbox_relay, process_index
from rewards.adapters.production.kafka_log import MAX_REQUEST_BYTES, KafkaEventLog, PublishFailed
from rewards.adapters.production.migrate import create_topic
from rewards.adapters.production.outbox_relay import OutboxRelay
from rewards.adapters.production.redis_keys import ProjectKeys, outbox_projects
from rewards.adapters.production.redis_state import open_redis_state
from rewards.devengines.clickhouse import connect as clickhouse_connect
from rewards.domain import claim_checks as cc
from rewards.domain.payout_config import TokenCurrency
from rewards.domain.payouts import User
from rewards.ports import Affiliate
from schemas.records import load_records
from schemas.topics import EVENTS_TOPIC
from tests.conftest import SERVICE, evm
from tests.support.harness import Admin, Api
from tests.support.kafka_helpers import PARTITIONS

ROOT = Path(__file__).resolve().parents[2]
OWN_DB = 7  # the store and relay tests' Redis database: the production server's relay (database 0) never sees it
USDC = TokenCurrency(address="0x" + "c" * 40, chain_id=8453, name="USDC", decimals=6)


class Boom(Exception):
    """A failure inside the block, before anything was published."""


def user(n: int) -> User:
    return User(evm(n), "evm_address")


# -- fixtures ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def own_redis_url(redis_url) -> str:
    parts = urlsplit(redis_url)
    return urlunsplit(parts._replace(path=f"/{OWN_DB}"))


@pytest.fixture
async def store(own_redis_url):
    store = await open_redis_state(own_redis_url)
    await store._redis.flushdb()  # this module's database: no other test's entries or index
    yield store
    await store.close()


@pytest.fixture
async def project(store) -> str:
    return await store.create_project("outbox")


@pytest.fixture(scope="module")
async def event_log(kafka_url):
    await create_topic(kafka_url, PARTITIONS, 1, EVENTS_TOPIC, {"max.message.bytes": str(MAX_REQUEST_BYTES)})
    instance = f"outbox-test-{uuid.uuid4().hex[:8]}"
    event_log = await KafkaEventLog.start(kafka_url, 2, instance)
    yield event_log
    await event_log.close()
    for path in Path(process_index.lock_dir()).glob(f"rewards-ingest-{instance}-*.lock"):
        path.unlink(missing_ok=True)


@pytest.fixture
async def relay(own_redis_url, event_log):
    relay = OutboxRelay.open(own_redis_url, event_log)
    yield relay
    await relay.close()


# -- helpers -----------------------------------------------------------------------------------------------


async def log_end(bootstrap: str) -> dict[TopicPartition, int]:
    """The end of every partition of the events topic (however many `rewards migrate` or a test gave it)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        partitions = [TopicPartition(EVENTS_TOPIC, p) for p in await producer.partitions_for(EVENTS_TOPIC)]
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    await consumer.start()
    try:
        return await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()


async def published_since(bootstrap: str, start: dict[TopicPartition, int], payload: bytes, timeout_s=15) -> int:
    """How many committed messages since `start` are exactly `payload`, once at least one is (or the time is up)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(list(start))
        for tp, offset in start.items():
            consumer.seek(tp, offset)
        found, deadline = 0, time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            found += sum(m.value == payload for messages in batches.values() for m in messages)
            if found and not batches:
                break
        return found
    finally:
        await consumer.stop()


def crash(redis_url: str, project_id: str, change: str, args: dict, due_s: float = 0.2) -> bytes:
    """Run the change in a process that SIGKILLs itself inside the block; the payload it was about to publish."""
    command = [
        sys.executable,
        "-m",
        "tests.support.outbox_crash",
        redis_url,
        project_id,
        change,
        json.dumps(args),
        str(due_s),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-3000:]
    assert done.stdout, "killed before it wrote its payload"
    return done.stdout


async def outbox(store, project_id: str) -> dict[str, float]:
    return dict(await store._redis.zrange(ProjectKeys(project_id).outbox(), 0, -1, withscores=True))


async def relay_until(relay: OutboxRelay, count: int, timeout_s: float = 10) -> None:
    relayed, deadline = 0, time.monotonic() + timeout_s
    while relayed < count:
        assert time.monotonic() < deadline, f"relayed {relayed} of {count} in {timeout_s} s"
        relayed += await relay.run_once()
        await asyncio.sleep(0.05)


def open_check(project_id: str, n: int, owner: User) -> cc.ClaimCheck:
    return cc.ClaimCheck(
        id=cc.check_id(project_id, f"outbox-{n}"), user=owner, currency=USDC, amount=1_000_000 * n,
        reason="end_user_payout", status=cc.OPEN, hash=None, source_id=f"outbox-{n}", created_ms=1_700_000_000_000,
        claimed_ms=None, version=1,
    )  # fmt: skip


async def one_code(store, project_id: str, owner: User) -> str:
    async with store.create_codes(project_id, owner, 1, None) as created:
        return created.value[0].code


# -- a process killed between the change and its publish -------------------------------------------------


async def test_a_change_killed_before_its_publish_is_published_by_the_relay(
    store, project, relay, kafka_url, own_redis_url
):
    """Each of the four changes, in a process SIGKILLed inside its block: the change is in Redis, its entry is
    in the outbox, and the relay publishes exactly the payload the dead process was about to publish."""
    code = await one_code(store, project, user(1))
    checks = [open_check(project, n, user(5)) for n in (1, 2)]
    await store.register_claim_checks(project, checks)
    changes = {
        "use_code": {"code": code, "user": evm(2)},
        "create_codes": {"owner": evm(3), "quantity": 2},
        "create_affiliate": {"user": evm(4)},
        "close_checks": {"owner": evm(5), "ids": [c.id for c in checks]},
    }
    start = await log_end(kafka_url)
    payloads = {change: crash(own_redis_url, project, change, args) for change, args in changes.items()}

    # Every change stands in Redis, and its entry waits in the outbox.
    assert (await store.referral_of(project, user(2))).code == code
    assert (await store.list_codes(project, user(3), 0, 10))[1] == 2
    assert await store.get_affiliate(project, user(4)) is not None
    async with store.update_claim_checks(project, [c.id for c in checks], lambda c: c, None) as current:
        assert {c.status for c in current.value} == {cc.CLOSED}
    records = await store._redis.hgetall(ProjectKeys(project).outbox_records())
    assert sorted(records.values()) == sorted(p.decode() for p in payloads.values())
    assert await store._redis.zscore(outbox_projects(), project) is not None

    await relay_until(relay, len(changes))
    assert await outbox(store, project) == {}
    for change, payload in payloads.items():
        assert await published_since(kafka_url, start, payload) == 1, change
    assert [r.type for p in payloads.values() for r in load_records(p)] == [
        "code_use", "codes_created", "affiliate", "claim_check", "claim_check",
    ]  # fmt: skip


def test_a_use_and_a_registration_killed_before_their_publish_reach_the_warehouse(production_server, clickhouse_url):
    """The production shape: the ingest API's relay publishes what the dead process did not, the workers write
    it, and the warehouse agrees with Redis (the referral, the affiliate)."""
    admin = Admin(production_server)
    project = admin.project()
    with Api(production_server, admin.key(project, SERVICE), project) as api:
        created = api.post("/referral_codes", json={"user_identifier": evm(1), "user_identifier_type": "evm_address"})
        assert created.status_code == 201, created.text
        code = created.json()[0]["code"]
    redis_url = production_server.env["REDIS_URL"]
    crash(redis_url, project, "use_code", {"code": code, "user": evm(2)}, due_s=0.5)
    crash(redis_url, project, "create_affiliate", {"user": evm(3)}, due_s=0.5)

    async def in_redis(state):
        return await state.referral_of(project, user(2)), await state.get_affiliate(project, user(3))

    referral, affiliate = Admin(production_server)._do(in_redis)
    assert referral.referrer == user(1) and affiliate is not None
    warehouse = clickhouse_connect(clickhouse_url)
    queries = {
        "referrals": "SELECT referrer_identifier AS who, code FROM referrals WHERE project_id = {p:String}",
        "affiliates": "SELECT user_identifier AS who, id AS code FROM affiliates WHERE project_id = {p:String}",
    }
    expected = {"referrals": [(evm(1), code)], "affiliates": [(evm(3), affiliate.id)]}
    deadline = time.monotonic() + 60
    for table, sql in queries.items():
        while (rows := warehouse.query(sql, parameters={"p": project}).result_rows) != expected[table]:
            assert time.monotonic() < deadline, f"{table}: {rows} (expected {expected[table]})"
            time.sleep(0.5)

    async def relayed(state):
        return await state._redis.zcard(ProjectKeys(project).outbox())

    assert Admin(production_server)._do(relayed) == 0


# -- the block fails ------------------------------------------------------------------------------------------


async def test_a_publish_refused_before_its_commit_undoes_the_change_and_its_entry(store, project, event_log):
    code = await one_code(store, project, user(1))
    with pytest.raises(PublishFailed) as failed:
        async with store.use_code(project, code, user(2), {}):
            assert len(await outbox(store, project)) == 1
            # Larger than the producer's request limit: refused by the send, before any commit.
            await event_log.publish(project, b"x" * (MAX_REQUEST_BYTES + 1))
    assert failed.value.maybe_published is False
    record = await store.get_code(project, code)
    assert (record.current_uses, record.used_by, await store.referral_of(project, user(2))) == (0, [], None)
    assert await outbox(store, project) == {}
    assert await store._redis.hlen(ProjectKeys(project).outbox_records()) == 0


@pytest.mark.parametrize("failure", ["maybe_published", "cancelled"])
async def test_a_publish_that_may_have_gone_through_keeps_the_change_for_the_relay(
    store, project, relay, kafka_url, failure
):
    code = await one_code(store, project, user(1))
    start = await log_end(kafka_url)

    async def use_then_fail():
        async with store.use_code(project, code, user(2), {}) as used:
            payload.append(used.payload)
            if failure == "maybe_published":
                raise PublishFailed("the commit's answer was lost", maybe_published=True)
            await asyncio.Event().wait()  # the publish, cancelled midway

    payload: list[bytes] = []
    task = asyncio.create_task(use_then_fail())
    if failure == "cancelled":
        while not payload:
            await asyncio.sleep(0.01)
        task.cancel()
    if failure == "maybe_published":
        await task  # the change stands: a success, not a 503 whose retry would find the code used
    else:
        with pytest.raises(asyncio.CancelledError):
            await task
    assert (await store.get_code(project, code)).current_uses == 1  # not undone
    assert list((await outbox(store, project)).values()) == [0.0]  # due at once
    await relay_until(relay, 1)
    assert await published_since(kafka_url, start, payload[0]) == 1


async def test_an_entry_the_relay_leased_is_not_undone_by_its_request(
    store, project, own_redis_url, event_log, kafka_url
):
    """The request stalled past its entry's due time: the relay took the entry, so the change stands even though
    the request's own publish then fails, and the relay publishes it."""
    code = await one_code(store, project, user(1))
    gate = GatedLog(event_log)
    relay = OutboxRelay.open(own_redis_url, gate)
    start = await log_end(kafka_url)
    try:
        async with store.use_code(project, code, user(2), {}) as used:  # no exception: the change stands
            [entry] = await outbox(store, project)
            await store._redis.zadd(ProjectKeys(project).outbox(), {entry: 0})  # due: the request stalled
            relaying = asyncio.create_task(relay.run_once())
            await gate.reached.wait()  # leased, its publish under way
            raise Boom
        assert (await store.get_code(project, code)).current_uses == 1
        assert await store.referral_of(project, user(2)) is not None
        assert list(await outbox(store, project)) == [entry]  # leased, not removed by the undo
        gate.open.set()
        assert await relaying == 1
    finally:
        gate.open.set()
        await relay.close()
    assert await outbox(store, project) == {}
    assert await published_since(kafka_url, start, used.payload) == 1


class GatedLog:
    """The real event log, behind a gate: a publish waits until the test opens it."""

    shards = 1  # never spreads conversions

    def __init__(self, event_log: KafkaEventLog):
        self.event_log = event_log
        self.reached, self.open = asyncio.Event(), asyncio.Event()

    async def publish(self, project_id: str, payload: bytes) -> None:
        self.reached.set()
        await self.open.wait()
        await self.event_log.publish(project_id, payload)


async def test_a_reply_lost_after_the_relay_leased_the_entry_does_not_undo(store, project):
    """The lost-reply undo also spares an entry no longer the request's own."""
    scripts = store._scripts

    async def applied_then_leased_then_lost(*args, **kwargs):
        await scripts.create_affiliate(*args, **kwargs)
        k = ProjectKeys(project)
        [entry] = await outbox(store, project)
        await store._redis.zadd(k.outbox(), {entry: 10**13})  # as a lease does
        raise RedisConnectionError("Connection reset by peer")

    store._scripts = replace(scripts, create_affiliate=applied_then_leased_then_lost)
    affiliate = Affiliate("a", user(1), None, "active", None, None, "missing", None, 1)
    try:
        with pytest.raises(RedisConnectionError):
            async with store.create_affiliate(project, affiliate):
                pass
    finally:
        store._scripts = scripts
    assert await store.get_affiliate(project, user(1)) == affiliate
    assert len(await outbox(store, project)) == 1


# -- the relay's index ----------------------------------------------------------------------------------------


async def test_a_change_touches_the_index_first_and_is_refused_on_a_stale_touch(store, project):
    k, scripts, touches = ProjectKeys(project), store._scripts, []

    async def touch_long_ago(*args, **kwargs):  # as if the request stalled after its touch
        touched = await scripts.outbox_touch(*args, **kwargs)
        touches.append(touched)
        return touched - 60_000 if len(touches) == 1 else touched

    store._scripts = replace(scripts, outbox_touch=touch_long_ago)
    try:
        async with store.create_codes(project, user(1), 1, None) as created:
            assert created.value and len(await outbox(store, project)) == 1
    finally:
        store._scripts = scripts
    assert len(touches) == 2  # the first attempt wrote nothing: touched again
    assert await store._redis.zscore(outbox_projects(), project) == touches[-1]
    assert await store._redis.zcard(k.outbox()) == 0
    # The script alone: past its write-by time it writes nothing, neither the change nor the entry.
    stale = await scripts.create_affiliate(
        keys=[k.outbox(), k.outbox_records(), k.affiliates()], args=["e", 1, b"[]", 0, "evm_address:x", "{}"]
    )
    assert stale == "stale" and await store._redis.hlen(k.affiliates()) == 0 and await outbox(store, project) == {}


async def test_the_index_forgets_a_project_only_idle_and_empty_and_not_touched_since(
    store, project, relay, monkeypatch
):
    other = await store.create_project("outbox-other")
    await one_code(store, project, user(1))
    await one_code(store, other, user(1))
    index = outbox_projects()
    touched = await store._redis.zscore(index, project)
    assert touched is not None and await store._redis.zscore(index, other) is not None

    # Compare-and-remove: a project touched since it was read stays.
    scripts = store._scripts
    assert await scripts.outbox_forget_project(keys=[index], args=[project, int(touched) - 1]) == 0
    assert await store._redis.zscore(index, project) == touched

    # Recently touched: kept by the relay even with an empty outbox.
    await relay.run_once()
    assert await store._redis.zscore(index, project) == touched

    # Idle, but an entry waits (of a request that died, not yet due): kept. Idle and empty: forgotten.
    monkeypatch.setattr(outbox_relay, "IDLE_S", 0)
    pending = ProjectKeys(other)
    await store._redis.zadd(pending.outbox(), {"pending": 10**13})
    await store._redis.hset(pending.outbox_records(), "pending", "[]")
    await asyncio.sleep(0.01)
    assert await relay.run_once() == 0
    assert await store._redis.zscore(index, project) is None
    assert await store._redis.zscore(index, other) is not None
    await store._redis.zrem(pending.outbox(), "pending")
    await relay.run_once()
    assert await store._redis.zscore(index, other) is None


# -- the event log tells whether a failed publish may have gone through -------------------------------------


async def test_a_commit_whose_answer_is_lost_may_have_published(kafka_url, event_log, monkeypatch):
    instance = f"outbox-commit-{uuid.uuid4().hex[:8]}"
    lossy = await KafkaEventLog.start(kafka_url, 1, instance)
    (slot,) = lossy._slots
    commit = slot.producer.commit_transaction

    async def committed_then_lost():
        await commit()
        raise ConnectionError("the commit's answer was lost")

    monkeypatch.setattr(slot.producer, "commit_transaction", committed_then_lost)
    try:
        with pytest.raises(PublishFailed) as failed:
            await lossy.publish("outbox-project", b"[]")
    finally:
        await lossy.close()
        for path in Path(process_index.lock_dir()).glob(f"rewards-ingest-{instance}-*.lock"):
            path.unlink(missing_ok=True)
    assert failed.value.maybe_published is True


async def test_a_publish_no_producer_took_surely_was_not_published(kafka_url, monkeypatch):
    instance = f"outbox-idle-{uuid.uuid4().hex[:8]}"
    stalled = await KafkaEventLog.start(kafka_url, 1, instance)
    monkeypatch.setattr(kafka_log, "PUBLISH_TIMEOUT_S", 0.5)
    for committer in stalled._committers:  # no producer takes anything any more
        committer.cancel()
    try:
        with pytest.raises(PublishFailed) as failed:
            await stalled.publish("outbox-project", b"[]")
    finally:
        await stalled.close()
        for path in Path(process_index.lock_dir()).glob(f"rewards-ingest-{instance}-*.lock"):
            path.unlink(missing_ok=True)
    assert failed.value.maybe_published is False


async def test_relay_metrics(store, project, relay):
    from prometheus_client import REGISTRY

    before = REGISTRY.get_sample_value("rewards_outbox_relayed_total") or 0
    async with store.create_codes(project, user(1), 1, None):
        raise PublishFailed("lost", maybe_published=True)  # the change stands, for the relay
    await relay_until(relay, 1)
    assert REGISTRY.get_sample_value("rewards_outbox_relayed_total") == before + 1
    await relay.run_once()
    assert REGISTRY.get_sample_value("rewards_outbox_backlog") == 0
