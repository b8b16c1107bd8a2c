"""The faust workers (`rewards workers`, real processes) on real engines: Apache Kafka, a ClickHouse server,
and the embedded SQLite state store, shared by path between the test and the workers."""

import asyncio
import contextlib
import os
import random
import signal
import socket
import time
import uuid
from decimal import Decimal

import httpx
import psutil
import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from aiokafka.partitioner import DefaultPartitioner

from ingest_api.events.schemas import ValidEvent
from ingest_api.events.service import accept_events
from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse
from rewards.adapters.production.kafka_log import KafkaEventLog, PublishFailed
from rewards.adapters.production.migrate import create_topic
from rewards.devengines import start_clickhouse, start_kafka
from rewards.domain.payouts import User
from runtime.wiring import open_embedded_state
from schemas.records import ConversionRecord, ReversalRecord, dump_records, load_records
from schemas.topics import EVENTS_TOPIC, partition_key
from tests.support.kafka_helpers import (
    PARTITIONS,
    POINTS_PER_EVENT,
    WorkerProcess,
    conversions,
    end_offsets,
    engine,
    eventually,
    payout_config,
    read_since,
    totals,
)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    return engine("kafka", "KAFKA_BOOTSTRAP_SERVERS", start_kafka, tmp_path_factory)


@pytest.fixture(scope="module")
def clickhouse(tmp_path_factory):
    return engine("clickhouse", "CLICKHOUSE_URL", start_clickhouse, tmp_path_factory)


@pytest.fixture(scope="module")
async def warehouse(clickhouse):
    warehouse = await ClickHouseWarehouse.connect(clickhouse.url)
    await warehouse.migrate()
    yield warehouse
    await warehouse.close()


@pytest.fixture(scope="module")
async def event_log(kafka):
    await create_topic(kafka.url, PARTITIONS, 1)
    event_log = await KafkaEventLog.start(kafka.url, 4)
    yield event_log
    await event_log.close()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """The state store (and the workers' plans) every worker of this module shares, as SQLite files."""
    return tmp_path_factory.mktemp("worker-state")


@pytest.fixture(scope="module")
def group_id() -> str:
    # One group for the module: each worker started continues from the offsets the previous ones committed.
    return f"rewards-workers-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def state(data_dir):
    state = open_embedded_state(data_dir)
    yield state
    await state.close()


@pytest.fixture
async def project(state) -> str:
    project_id = await state.create_project("kafka")
    await state.put_config(project_id, payout_config())
    return project_id


@pytest.fixture
def start_worker(kafka, clickhouse, data_dir, group_id, warehouse, event_log):
    workers = []
    engines = {
        "KAFKA_BOOTSTRAP_SERVERS": kafka.url,
        "CLICKHOUSE_URL": clickhouse.url,
        "REWARDS_WORKER_GROUP_ID": group_id,
    }

    def start(name: str = "worker", **env: str) -> WorkerProcess:
        workers.append(WorkerProcess(data_dir, {**engines, **env}, name).start())
        return workers[-1]

    yield start
    # Those still running stop cleanly on SIGTERM (all are stopped before any is checked).
    running = [worker for worker in workers if worker.process.poll() is None]
    for worker in running:
        worker.terminate()
    for worker in running:
        assert worker.wait() == 0, worker.log()[-3000:]


async def test_aborted_transactions_are_never_written(kafka, event_log, warehouse, project, start_worker, monkeypatch):
    before = await end_offsets(kafka.url)
    await _publish_and_abort_by_hand(kafka.url, project)
    one_producer = await KafkaEventLog.start(kafka.url, 1)
    try:
        await _publish_failing_after_the_send(one_producer, project, monkeypatch)
        # the same producer, usable again
        await one_producer.publish(project, dump_records(conversions(project, "committed", 5)))
    finally:
        await one_producer.close()

    # The aborted records are in the log: a read_uncommitted reader would write them.
    seen = await read_since(kafka.url, before, "read_uncommitted")
    assert {load_records(m.value)[0].batch_id for m in seen if m.key == partition_key(project)} == {
        "aborted-by-hand",
        "failed-publish",
        "committed",
    }

    worker = start_worker()
    assert await eventually(lambda: _expect_totals(warehouse, project, 5)) == (5, 5 * POINTS_PER_EVENT)
    worker.wait_for_log('"isolation_level": "read_committed"')
    batch_ids = await warehouse.query(
        "SELECT DISTINCT batch_id FROM conversions WHERE project_id = {p:String}", {"p": project}
    )
    assert [row["batch_id"] for row in batch_ids] == ["committed"]


async def _publish_and_abort_by_hand(bootstrap: str, project: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"test-abort-{uuid.uuid4().hex}")
    await producer.start()
    try:
        await producer.begin_transaction()
        records = dump_records(conversions(project, "aborted-by-hand", 5))
        await producer.send_and_wait(EVENTS_TOPIC, records, key=partition_key(project))
        await producer.abort_transaction()
    finally:
        await producer.stop()


async def _publish_failing_after_the_send(event_log: KafkaEventLog, project: str, monkeypatch) -> None:
    (slot,) = event_log._slots
    send = slot.producer.send

    async def send_then_fail(*args, **kwargs):
        await (await send(*args, **kwargs))
        raise RuntimeError("failure after the send, inside the transaction")

    with monkeypatch.context() as patch:
        patch.setattr(slot.producer, "send", send_then_fail)
        with pytest.raises(PublishFailed):
            await event_log.publish(project, dump_records(conversions(project, "failed-publish", 5)))


async def _expect_totals(warehouse, project: str, events: int) -> tuple[int, int]:
    found = await totals(warehouse, project)
    assert found == (events, events * POINTS_PER_EVENT)
    return found


async def test_two_workers_share_the_partitions_and_write_each_event_once(
    event_log, warehouse, state, project, start_worker
):
    workers = [start_worker("a"), start_worker("b")]
    events = [_event(f"e2e-{i}", i) for i in range(400)]
    batches = [events[i : i + 40] for i in range(0, len(events), 40)]
    for batch in batches:
        assert await accept_events(state, event_log, project, batch) == (len(batch), None)

    await eventually(lambda: _expect_totals(warehouse, project, len(events)))

    async def shared():
        a, b = (worker.assigned_partitions() for worker in workers)
        assert a and b and not a & b and a | b == set(range(PARTITIONS))

    await eventually(shared, timeout_s=20)

    async def marked():  # once written: a moment after the totals show them
        assert {await state.event_status(project, e.dedup_id) for e in events} == {"processed"}

    await eventually(marked, timeout_s=10)
    assert await accept_events(state, event_log, project, batches[0]) == (0, None)  # known: not published again


async def test_a_reversal_before_its_event_waits_for_it_and_holds_back_no_other_partition(
    event_log, warehouse, state, project, start_worker
):
    """A project's conversions spread by user, its reversals on its own partition (schemas.topics): a reversal can
    reach a worker before its event is written. It waits (never set aside), its partition's fetching paused, while
    every other partition is written; once the event comes, the reversal takes it back whole."""
    worker = start_worker("lanes", REWARDS_LOG_LEVEL="info")
    other = await state.create_project("other")
    await state.put_config(other, payout_config())
    (late,) = conversions(project, f"late-{uuid.uuid4().hex[:6]}", 1)
    late = late.model_copy(update={"received_ms": int(time.time() * 1000)})  # its dedup_ids row within the window
    user = User(late.user_identifier, late.user_identifier_type)
    async with state.ingest(project, [late.dedup_id], [(user, late.name)], None):
        pass  # accepted (the state store has it), its message not yet in the log: its partition is behind
    taken_back = ReversalRecord(project_id=project, id=f"r-{late.dedup_id}", dedup_id=late.dedup_id, reason="refund",
                                fraction="1", reversed_before="0", reversed_after="1", reversed_at_ms=1)  # fmt: skip
    ahead, behind = event_log.partition_of(project, 0), 1  # the reversal's partition, and the event's shard
    await event_log.publish_shards(project, {0: dump_records([taken_back])})
    after = conversions(other, f"after-{uuid.uuid4().hex[:6]}", 4 * PARTITIONS)
    shards = {event_log.partition_of(other, s): s for s in range(PARTITIONS)}  # other's shard of each partition
    elsewhere = {shards[p]: dump_records(after[p::PARTITIONS]) for p in range(PARTITIONS) if p != ahead}
    await event_log.publish_shards(other, elsewhere)

    async def others_written():
        assert await totals(warehouse, other) == (4 * (PARTITIONS - 1), 4 * (PARTITIONS - 1) * POINTS_PER_EVENT)
        assert "delivery waits for another partition" in worker.log()

    await eventually(others_written, timeout_s=30)
    assert await totals(warehouse, project) == (0, 0)
    await event_log.publish_shards(other, {shards[ahead]: dump_records(after[ahead::PARTITIONS])})  # behind it
    await event_log.publish_shards(project, {behind: dump_records([late])})  # the event, at last, on its partition

    async def all_written():
        assert await totals(warehouse, project) == (1, 0)  # paid, then taken back whole
        assert await totals(warehouse, other) == (len(after), len(after) * POINTS_PER_EVENT)

    await eventually(all_written, timeout_s=30)
    dead = await warehouse.query("SELECT count() AS n FROM dead_letters WHERE project_id = {p:String}", {"p": project})
    assert int(dead[0]["n"]) == 0
    assert "delivery waited" in worker.log()


def _event(dedup_id: str, n: int) -> ValidEvent:
    return ValidEvent("purchase", dedup_id, f"0x{n:040x}", "evm_address", None, {}, {})


async def test_sigkill_mid_stream_then_restart_writes_every_event_exactly_once(
    kafka, event_log, warehouse, project, group_id, start_worker
):
    """SIGKILL while a delivery is written to ClickHouse but its offsets are not committed, in the middle
    of 100 batches of 100 events. The records go straight to the log, without the state store's claims:
    nothing marks them known before the worker does, so exactness rests on the tokens and plans alone."""
    worker = start_worker("killed")
    worker.wait_for_log("Worker ready")
    publishing = asyncio.create_task(_publish_batches(event_log, project, batches=100, size=100))
    await eventually(lambda: _written_at_least(warehouse, project, 1000), every_s=0.05)
    probe = CommitProbe(kafka.url, group_id, project)
    async with Stopped(worker.process.pid) as frozen:
        deadline = time.monotonic() + 20
        while not await probe.written_beyond_commit(warehouse):
            assert time.monotonic() < deadline, "never caught the worker between a write and its commit"
            await frozen.thaw_briefly()
        worker.kill()
    written_at_kill = (await totals(warehouse, project))[0]
    print(f"killed after {probe.probes} probes, {written_at_kill} events written")
    await probe.close()
    await publishing

    restarted = start_worker("restarted")
    await eventually(lambda: _expect_totals(warehouse, project, 10_000), timeout_s=40)
    assert written_at_kill < 10_000
    restarted.wait_for_log("following the recorded plan")  # the uncommitted delivery, read again under its plan


async def _publish_batches(event_log, project: str, batches: int, size: int) -> None:
    for b in range(batches):
        await event_log.publish(project, dump_records(conversions(project, f"crash-{b}", size)))


async def _written_at_least(warehouse, project: str, count: int) -> None:
    assert (await totals(warehouse, project))[0] >= count


class Stopped:
    """A process frozen with SIGSTOP (the state checks on it cannot race it), thawed at exit if still alive."""

    def __init__(self, pid: int):
        self.pid = pid

    async def __aenter__(self) -> "Stopped":
        os.kill(self.pid, signal.SIGSTOP)
        return self

    async def thaw_briefly(self) -> None:
        os.kill(self.pid, signal.SIGCONT)
        await asyncio.sleep(0.01)
        os.kill(self.pid, signal.SIGSTOP)
        await asyncio.sleep(0.005)  # let the stop land before looking

    async def __aexit__(self, *exc) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGCONT)


class CommitProbe:
    """Whether the warehouse holds rows of messages past the group's committed offset (written, not committed)."""

    def __init__(self, bootstrap: str, group_id: str, project: str):
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.project = project
        partition = DefaultPartitioner()(partition_key(project), list(range(PARTITIONS)), list(range(PARTITIONS)))
        self.tp = TopicPartition(EVENTS_TOPIC, partition)
        self.records_at: dict[int, int] = {}  # offset -> this project's records in the message
        self.admin = None
        self.probes = 0

    async def written_beyond_commit(self, warehouse) -> bool:
        self.probes += 1
        if self.admin is None:
            self.admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
            await self.admin.start()
        committed = await self.admin.list_consumer_group_offsets(self.group_id, partitions=[self.tp])
        offset = max(committed[self.tp].offset, 0) if self.tp in committed else 0
        await self._index_until(offset)
        committed_rows = sum(count for at, count in self.records_at.items() if at < offset)
        return (await totals(warehouse, self.project))[0] > committed_rows

    async def _index_until(self, offset: int) -> None:
        start = max(self.records_at, default=-1) + 1
        if start >= offset:
            return
        for message in await read_since(self.bootstrap, {self.tp: start}, "read_committed", until={self.tp: offset}):
            records = load_records(message.value)
            self.records_at[message.offset] = sum(r.project_id == self.project for r in records)

    async def close(self) -> None:
        if self.admin is not None:
            await self.admin.close()


async def test_a_broker_outage_fails_publishes_fast_and_workers_still_stop(kafka, event_log, project, start_worker):
    if kafka.engine is None:
        pytest.skip("the broker comes from KAFKA_BOOTSTRAP_SERVERS: it cannot be stopped here")
    worker = start_worker("outage", REWARDS_WORKER_STOP_TIMEOUT_S="3")
    worker.wait_for_log("Worker ready")
    await event_log.publish(project, dump_records(conversions(project, "before", 1)))
    await asyncio.to_thread(kafka.engine.stop)
    try:
        publishing, starting, stopping = await asyncio.gather(
            _outcome(event_log.publish(project, dump_records(conversions(project, "down", 1)))),
            _outcome(KafkaEventLog.start(kafka.url, 2)),
            _outcome(asyncio.to_thread(worker.stop)),
        )
    finally:
        await asyncio.to_thread(kafka.engine.start)
    assert isinstance(publishing[0], PublishFailed) and publishing[1] < 5  # PUBLISH_TIMEOUT_S
    assert isinstance(starting[0], Exception) and starting[1] < 5
    # aiokafka's consumer cannot stop without its broker: the worker leaves after its stop timeout.
    assert stopping[0] is not None and stopping[1] < 6
    for attempt in range(4):  # every producer of the pool in turn: one replaced, the others reconnected
        await event_log.publish(project, dump_records(conversions(project, f"after-{attempt}", 1)))


async def _outcome(awaitable) -> tuple[object, float]:
    """What `awaitable` returned or raised, and how long it took."""
    started = time.monotonic()
    try:
        result = await awaitable
    except Exception as exc:
        result = exc
    return result, time.monotonic() - started


async def test_a_failed_offset_commit_stops_the_worker_with_status_1_and_a_restart_writes_exact_totals(
    kafka, event_log, warehouse, project, group_id, start_worker
):
    """The broker stops while a delivery is written and its offsets are not committed: the commit cannot be
    done (aiokafka would retry it for as long as the broker is away), and once REWARDS_WORKER_COMMIT_TIMEOUT_S
    is past the worker stops and exits 1, never merely logging it. Restarted with the broker back, a worker
    reads the delivery again under its plan and writes every event exactly once."""
    if kafka.engine is None:
        pytest.skip("the broker comes from KAFKA_BOOTSTRAP_SERVERS: it cannot be stopped here")
    # A backlog first, in deliveries of one message each: the worker is caught between a write and its commit.
    await _publish_batches(event_log, project, batches=40, size=100)
    timeouts = {"REWARDS_WORKER_COMMIT_TIMEOUT_S": "2", "REWARDS_WORKER_STOP_TIMEOUT_S": "3"}
    worker = start_worker("commit-fails", REWARDS_WORKER_BATCH_SIZE="100", **timeouts)
    await eventually(lambda: _written_at_least(warehouse, project, 100), every_s=0.05)
    probe = CommitProbe(kafka.url, group_id, project)
    try:
        async with Stopped(worker.process.pid) as frozen:
            try:
                deadline = time.monotonic() + 20
                while not await probe.written_beyond_commit(warehouse):
                    assert time.monotonic() < deadline, "never caught the worker between a write and its commit"
                    await frozen.thaw_briefly()
            finally:
                await probe.close()
            await asyncio.to_thread(kafka.engine.stop)
        # Thawed: its commit meets no broker.
        status = await asyncio.to_thread(worker.wait)
    finally:
        await asyncio.to_thread(kafka.engine.start)
    assert status == 1, worker.log()[-3000:]
    assert "committing offsets failed" in worker.log()

    restarted = start_worker("after-failed-commit")
    await eventually(lambda: _expect_totals(warehouse, project, 4000), timeout_s=60)
    restarted.wait_for_log("following the recorded plan")  # the uncommitted delivery, read again under its plan


# -- `rewards workers --processes N` ------------------------------------------------------------------------------


async def test_processes_2_share_the_partitions_and_write_each_event_once(
    kafka, event_log, warehouse, state, group_id, start_worker
):
    """One `rewards workers --processes 2` (here REWARDS_WORKER_PROCESSES, the option's variable): two worker
    processes in the group, each writing deliveries of its own partitions, every event once."""
    projects = await _projects_on_every_partition(state)
    port = _free_port_pair()
    parent = start_worker("processes", REWARDS_WORKER_PROCESSES="2", REWARDS_WORKER_METRICS_PORT=str(port))
    children = await eventually(lambda: _children(parent, 2))
    await eventually(lambda: _stable_with_members(kafka.url, group_id, 2), timeout_s=60, every_s=0.5)
    events = {project: [_event(f"procs-{project[:8]}-{i}", i) for i in range(200)] for project in projects}
    for project, project_events in events.items():
        for first in range(0, len(project_events), 50):
            batch = project_events[first : first + 50]
            assert await accept_events(state, event_log, project, batch) == (len(batch), None)

    for project, project_events in events.items():
        await eventually(lambda p=project, n=len(project_events): _expect_totals(warehouse, p, n), timeout_s=60)
    for project, project_events in events.items():  # marked once written: a moment after the totals show them

        async def marked(p=project, events_of=project_events):
            assert {await state.event_status(p, e.dedup_id) for e in events_of} == {"processed"}

        await eventually(marked, timeout_s=10)
    # Each process wrote deliveries (child i serves its metrics on port + i): the partitions were shared.
    assert all(_metric(port + i, "rewards_worker_deliveries_total") >= 1 for i in range(2))
    assert len({child.pid for child in children}) == 2


async def test_processes_fail_as_one_unit(start_worker):
    """A child that dies (here SIGKILL) stops the other; the command exits 1, for its supervisor to restart them."""
    parent = start_worker("processes-unit", REWARDS_WORKER_PROCESSES="2")
    killed, other = await eventually(lambda: _children(parent, 2))
    parent.wait_for_log("Worker ready")
    killed.kill()
    assert await asyncio.to_thread(parent.wait) == 1, parent.log()[-3000:]
    assert not other.is_running() or other.status() == psutil.STATUS_ZOMBIE
    assert "a worker process exited; stopping the others" in parent.log()


async def _stable_with_members(bootstrap: str, group_id: str, count: int) -> None:
    """The consumer group has settled with `count` members (each holds its share of the partitions)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        (response,) = await admin.describe_consumer_groups([group_id])
    except KafkaError as exc:  # no coordinator yet: the group is still forming
        raise AssertionError(exc) from exc
    finally:
        await admin.close()
    group = response.to_object()["groups"][0]
    assert (group["state"], len(group["members"])) == ("Stable", count)


async def _children(parent, count: int) -> list:
    children = psutil.Process(parent.process.pid).children()
    assert len(children) == count
    return children


async def _projects_on_every_partition(state) -> list[str]:
    """Projects whose records land on every partition of the topic (a topic is keyed by project)."""
    partitioner, partitions = DefaultPartitioner(), list(range(PARTITIONS))
    by_partition: dict[int, str] = {}
    while len(by_partition) < PARTITIONS:
        project = await state.create_project("processes")
        partition = partitioner(partition_key(project), partitions, partitions)
        if partition not in by_partition:
            await state.put_config(project, payout_config())
            by_partition[partition] = project
    return list(by_partition.values())


def _free_port_pair() -> int:
    """A port P with P + 1 free too, below the ephemeral range (where a client's connection could take P + 1)."""
    for port in random.sample(range(20_000, 32_000, 2), 100):
        with contextlib.suppress(OSError), socket.socket() as a, socket.socket() as b:
            a.bind(("0.0.0.0", port))
            b.bind(("0.0.0.0", port + 1))
            return port
    raise RuntimeError("no two consecutive free ports")


def _metric(port: int, name: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " "))


# -- caps and budgets, exact across worker processes (API.md §8) -------------------------------------------------

LIMITED = {
    "default_tier": None,
    "tiers": [],
    "conversions": [
        {"event_name": "purchase", "base": {"fixed": "7"}, "end_user_reward": {"rate": "1"}},
        {"event_name": "swap", "base": {"fixed": "3"}, "end_user_reward": {"rate": "1"},
         "currency": {"address": "0x" + "c0" * 20, "chain_id": 1, "name": "USDC", "decimals": 6}},
    ],
    "caps": [{"applies_to": "end_user", "currency": "point", "amount": "1000", "window": "30d"}],
    "budgets": [{"currency": "0x" + "c0" * 20, "amount": "1000000000"}],
}  # fmt: skip
CAPPED_USER = "0x" + "ca" * 20
LIMIT_SUMS = """
SELECT currency, sum(amount) AS paid, count() AS n, uniqExact(payout_id) AS ids FROM {table:Identifier}
WHERE project_id = {p:String} GROUP BY currency
"""


async def test_caps_and_budgets_hold_to_the_unit_across_worker_processes_and_a_sigkill(
    kafka, warehouse, start_worker, tmp_path_factory
):
    """Three worker processes (each its own Lua calls on one Redis) take one project's records from every partition
    at once (published straight to each partition: a project's records share one otherwise), and one of them is
    SIGKILLed mid-way, its deliveries read again by the others: the capped user is paid exactly its cap (7 points asked
    400 times, 1000 paid: 142 whole payouts and one cut to 6), the token budget is paid exactly (3 USDC asked 600
    times, 1000 USDC paid), what was asked is paid + rejected to the unit, and no payout is written twice."""
    from ingest_api.projects.service import parse_config
    from rewards.adapters.production.redis_state import open_redis_state
    from rewards.devengines import start_redis

    redis = engine("redis", "REDIS_URL", start_redis, tmp_path_factory)
    state = await open_redis_state(redis.url)
    project = await state.create_project("limits")
    await state.put_config(project, parse_config(LIMITED))
    env = {"REWARDS_WORKER_STATE": "redis", "REDIS_URL": redis.url}
    workers = [start_worker(f"limits-{n}", **env) for n in range(3)]
    for worker in workers:
        worker.wait_for_log("Worker ready")
    now = int(time.time() * 1000)
    records = [_limited(project, f"buy-{n}", "purchase", CAPPED_USER, now) for n in range(400)]
    records += [_limited(project, f"swap-{n}", "swap", f"0x{n:040x}", now) for n in range(600)]
    random.Random(7).shuffle(records)
    producer = AIOKafkaProducer(bootstrap_servers=kafka.url)
    await producer.start()
    try:
        for n, start in enumerate(range(0, len(records), 20)):
            batch = records[start : start + 20]
            await producer.send_and_wait(EVENTS_TOPIC, dump_records(batch), key=partition_key(project),
                                         partition=n % PARTITIONS)  # fmt: skip
            if n == 20:
                workers[1].kill()  # mid-way: its deliveries, maybe allotted and not written, go to the others
                start_worker("limits-restarted", **env)
    finally:
        await producer.stop()

    async def all_written():  # dedup_ids: each delivery's last insert (its payouts are written before)
        query = "SELECT count() AS n FROM dedup_ids WHERE project_id = {p:String}"
        rows = await warehouse.query(query, {"p": project})
        assert int(rows[0]["n"]) == 1000

    await eventually(all_written, timeout_s=90)
    paid = {r["currency"]: r for r in await warehouse.query(LIMIT_SUMS, {"table": "payouts", "p": project})}
    refused = {r["currency"]: r for r in await warehouse.query(LIMIT_SUMS, {"table": "rejected_payouts", "p": project})}
    token = "0x" + "c0" * 20
    assert Decimal(paid["point"]["paid"]) == 1000 and Decimal(refused["point"]["paid"]) == 400 * 7 - 1000
    assert Decimal(paid[token]["paid"]) == 10**9 and Decimal(refused[token]["paid"]) == 600 * 3 * 10**6 - 10**9
    for table in (paid, refused):
        assert all(int(r["n"]) == int(r["ids"]) for r in table.values())  # no payout written twice
    assert int(paid["point"]["n"]) == 143 and int(paid[token]["n"]) == 334  # 142 whole + 1 cut; 333 whole + 1 cut
    assert await state.budgets_paid(project, [token]) == {token: 10**9}
    await state.close()


def _limited(project: str, dedup_id: str, name: str, user: str, at_ms: int) -> ConversionRecord:
    return ConversionRecord(project_id=project, batch_id=dedup_id, dedup_id=dedup_id, name=name, user_identifier=user,
                            user_identifier_type="evm_address", timestamp_ms=at_ms, received_ms=at_ms)  # fmt: skip
