"""The production shape on a 3-node Kafka cluster (issue 13, item 2): one broker lost under load loses nothing.

Topics with 3 replicas and `min.insync.replicas` 2 (REWARDS_KAFKA_REPLICATION_FACTOR, REWARDS_KAFKA_MIN_INSYNC_REPLICAS,
set by `rewards migrate`), every producer with acks=all: a write is acknowledged once two replicas have it, so a
broker SIGKILLed loses no acknowledged write, and the two left go on taking writes once leadership has moved.

Under a steady load (one client per project, each sending batches of new events, and sending a batch answered 503
again after its Retry-After, as a client does), a broker is SIGKILLed (the transactions' coordinator, unless it
leads the controller quorum), started again once the load goes on without it, and, with every replica back in
sync, then the active controller the same way. Then every event is paid exactly once, refused ones included (they
were sent again until accepted), and the edge never crashed. The stall (the longest gap between two answers 200,
and the 503s) is printed for each fault. Meanwhile a reader of the workers' lag (rewards.adapters.production.kafka_lag,
as the ingest edge measures its back-pressure) answers or gives up in time, never failing otherwise.

Redis and ClickHouse are the session's (projects keep tests apart; delivery tokens carry the cluster's id).
"""

import asyncio
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import psutil
import pytest

from rewards.devengines import Engine
from rewards.devengines.clickhouse import connect
from rewards.devengines.kafka import KafkaCluster
from rewards.settings import Settings
from schemas.topics import DLQ_TOPIC, EVENTS_TOPIC
from tests.conftest import SERVICE, event, evm
from tests.runtime.test_production_faults import assert_log_unavailable
from tests.support.harness import Admin, Api, ProductionServer, run_async
from tests.support.kafka_cluster import in_sync
from tests.support.kafka_helpers import drain_markers

REPLICATION = {"REWARDS_KAFKA_REPLICATION_FACTOR": "3", "REWARDS_KAFKA_MIN_INSYNC_REPLICAS": "2"}
INTERNAL_TOPICS = ["__consumer_offsets", "__transaction_state"]
CONFIG = {
    "default_tier": None,
    "tiers": [],
    "conversions": [{"event_name": "purchase", "base": {"fixed": "7"}, "end_user_reward": {"rate": "1"}}],
}
POINTS_PER_EVENT = 7
PROJECTS = 3  # one client each: their records go to (likely) different partitions, led by different brokers
EVENTS_PER_BATCH = 20
PACE_S = 0.05  # between two batches of a client
STEADY = 10  # answers 200 that show the load going on (before a fault, without the broker, after its return)
# A killed broker stays down at least this long: the controller fences it after broker.session.timeout.ms (9 s),
# and only then moves the leadership of its partitions to the others.
DOWN_AT_LEAST_S = 12
GIVE_UP_S = 120  # a batch still refused after this is given up (and the test fails)


def engines(kafka: KafkaCluster, redis_url: str, clickhouse_url: str) -> dict[str, str]:
    return {"KAFKA_BOOTSTRAP_SERVERS": kafka.url, "REDIS_URL": redis_url, "CLICKHOUSE_URL": clickhouse_url}


@pytest.mark.cluster
def test_migrate_creates_the_topics_with_the_replication_settings(kafka_cluster, redis_url, clickhouse_url):
    env = {**os.environ, **engines(kafka_cluster, redis_url, clickhouse_url), **REPLICATION}
    migrated = subprocess.run(
        [sys.executable, "-m", "rewards", "migrate"], env=env, capture_output=True, text=True, timeout=120
    )
    assert migrated.returncode == 0, migrated.stderr
    for topic in (EVENTS_TOPIC, DLQ_TOPIC):
        replicas, min_insync = run_async(replication_of(kafka_cluster.url, topic))
        assert replicas == {3}, topic
        assert min_insync == ("2", "topic"), topic  # the topic's own config, not the brokers' default (also 2)


def test_migrate_refuses_more_insync_replicas_than_replicas():
    unreachable = {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "REDIS_URL": "redis://127.0.0.1:1", "CLICKHOUSE_URL": "x"}
    replication = {"REWARDS_KAFKA_REPLICATION_FACTOR": "1", "REWARDS_KAFKA_MIN_INSYNC_REPLICAS": "2"}
    env = {**os.environ, **unreachable, **replication}  # (refused before any engine is asked)
    migrated = subprocess.run([sys.executable, "-m", "rewards", "migrate"], env=env, capture_output=True, text=True)
    assert migrated.returncode != 0
    assert "REWARDS_KAFKA_MIN_INSYNC_REPLICAS (2) exceeds REWARDS_KAFKA_REPLICATION_FACTOR (1)" in migrated.stderr


async def test_migrate_refuses_a_topic_with_fewer_replicas_than_min_insync(kafka_url):
    """An install whose topic has 1 replica, migrated with min.insync.replicas 2 (RF 3 in the settings): every write
    would be refused, so migrate refuses, and changes nothing."""
    from rewards.adapters.production.migrate import create_topic

    topic = f"rf1-{os.getpid()}-{time.monotonic_ns()}"
    assert await create_topic(kafka_url, 1, 1, topic, {"retention.ms": "60000"})
    with pytest.raises(SystemExit, match=r"fewer than min\.insync\.replicas 2"):
        await create_topic(kafka_url, 1, 3, topic, {"min.insync.replicas": "2"})
    replicas, (value, _) = await replication_of(kafka_url, topic)
    assert replicas == {1} and value == "1"  # the broker's default: the config was left alone


async def replication_of(bootstrap: str, topic: str) -> tuple[set[int], tuple[str, str]]:
    """The replica counts of the topic's partitions, and its `min.insync.replicas` with where it comes from."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
        resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={"min.insync.replicas": None})
        [response] = await admin.describe_configs([resource])
    finally:
        await admin.close()
    [[code, _, _, _, entries]] = response.resources
    assert code == 0
    [(_, value, _, source, *_)] = entries
    # DescribeConfigs v1+: source 1 is DYNAMIC_TOPIC_CONFIG; v0 tells only whether it is a default.
    origin = "topic" if (source is False if response.API_VERSION == 0 else source == 1) else "default"
    return {len(p["replicas"]) for t in described for p in t["partitions"]}, (value, origin)


# -- a broker lost under load ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(kafka_cluster, redis_url, clickhouse_url) -> Iterator[ProductionServer]:
    # One key per project sends every batch: the contract's 10 a minute would hold the load back.
    env = {**REPLICATION, "REWARDS_RATE_LIMITS": '{"events_batch": "100000/minute"}'}
    server = ProductionServer(engines(kafka_cluster, redis_url, clickhouse_url), env=env).start()
    yield server
    server.stop()


@dataclass
class Answer:
    at: float  # time.monotonic() when it came
    status: int


@dataclass
class Stall:
    fault: str
    node: str
    longest_gap_s: float  # between two answers 200, from the last one before the kill until the end of the fault
    refused: int  # answers 503 meanwhile
    killed_at: float
    restarted_at: float

    @property
    def down_s(self) -> float:
        return self.restarted_at - self.killed_at

    def __str__(self) -> str:
        return (
            f"{self.fault} ({self.node}, down {self.down_s:.1f} s): longest gap between two 200s"
            f" {self.longest_gap_s:.1f} s, {self.refused} answers 503"
        )


class Load:
    """One client per project, each sending batches of new events at a steady pace until stopped; a batch
    answered 503 is sent again after its Retry-After until answered 200 (the last ones even after the stop)."""

    def __init__(self, clients: list[Api]):
        self.clients = clients
        self.accepted: dict[str, list[dict]] = {client.project_id: [] for client in clients}  # bodies answered 200
        self.answers: list[Answer] = []
        self.refusals: list[httpx.Response] = []  # every answer other than 200
        self.batches_refused = 0  # batches answered 503 at least once (and sent again)
        self.batches_given_up = 0  # still refused after GIVE_UP_S, or answered neither 200 nor 503
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(client,)) for client in clients]

    def __enter__(self) -> "Load":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(180)

    def ok_since(self, moment: float) -> int:
        return sum(1 for answer in list(self.answers) if answer.status == 200 and answer.at >= moment)

    def wait_ok(self, count: int, since: float, what: str, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while self.ok_since(since) < count:
            assert time.monotonic() < deadline, f"{what}: fewer than {count} batches accepted in {timeout_s:.0f} s"
            time.sleep(0.05)

    def stall(self, fault: str, node: str, killed: float, restarted: float, until: float) -> Stall:
        answers = list(self.answers)
        oks = [a.at for a in answers if a.status == 200 and a.at <= until]
        before = [at for at in oks if at < killed][-1:]
        times = before + [at for at in oks if at >= killed]
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        refused = sum(1 for a in answers if a.status == 503 and killed <= a.at <= until)
        return Stall(fault, node, max(gaps, default=0.0), refused, killed, restarted)

    def _run(self, api: Api) -> None:
        number = 0
        while not self._stop.is_set():
            batch = [event(f"{number}-{i}", user=evm(i % 100)) for i in range(EVENTS_PER_BATCH)]
            body = {"events": batch}
            if self._send_until_accepted(api, body):
                self.accepted[api.project_id].append(body)
            else:
                self.batches_given_up += 1
            number += 1
            time.sleep(PACE_S)

    def _send_until_accepted(self, api: Api, body: dict) -> bool:
        refused, deadline = False, time.monotonic() + GIVE_UP_S
        while True:
            response = api.post("/events/batch", json=body)
            self.answers.append(Answer(time.monotonic(), response.status_code))
            if response.status_code == 200:
                self.batches_refused += refused
                return True
            self.refusals.append(response)
            if response.status_code != 503 or time.monotonic() > deadline:
                return False
            refused = True
            time.sleep(float(response.headers.get("Retry-After", 1)))


class LagProbe:
    """Measures the workers' lag as the ingest edge does (its own KafkaLag), every 0.2 s until stopped, and keeps
    what each measure gave: a number, or the name of the exception it raised."""

    def __init__(self, bootstrap: str, group_id: str):
        self.bootstrap, self.group_id = bootstrap, group_id
        self.outcomes: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()))

    def __enter__(self) -> "LagProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    def answered_between(self, start: float, end: float) -> int:
        return sum(1 for at, outcome in list(self.outcomes) if start <= at <= end and outcome.isdigit())

    async def _run(self) -> None:
        from rewards.adapters.production.kafka_lag import KafkaLag

        lag = await KafkaLag.start(self.bootstrap, self.group_id)
        try:
            while not self._stop.is_set():
                try:
                    outcome = str(await lag.backlog())
                except Exception as exc:
                    outcome = type(exc).__name__
                self.outcomes.append((time.monotonic(), outcome))
                await asyncio.sleep(0.2)
        finally:
            await lag.close()


@dataclass
class Outcome:
    stalls: list[Stall]
    load: Load
    lag: LagProbe
    expected: dict[str, int]  # events per project, each to be paid once
    clients: list[Api]
    workers_restarted: int
    memory_mb: dict[str, float] = field(default_factory=dict)  # RSS of each broker at the end


def transaction_coordinator(bootstrap: str) -> int:
    """The node id leading `__transaction_state` (one partition here: every transactional producer's coordinator)."""

    async def leader() -> int:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            [topic] = await admin.describe_topics(["__transaction_state"])
            return topic["partitions"][0]["leader"]
        finally:
            await admin.close()

    return run_async(leader())


def lose(cluster: KafkaCluster, node: Engine, load: Load, fault: str, topics: list[str]) -> Stall:
    """SIGKILL `node` under the load, start it again once the load goes on without it (after the cluster fenced
    it), and wait until every replica is in sync again and the load goes on."""
    load.wait_ok(STEADY, time.monotonic(), f"{fault}: no steady load before")
    killed = time.monotonic()
    node.kill()
    time.sleep(DOWN_AT_LEAST_S)
    load.wait_ok(STEADY, killed + DOWN_AT_LEAST_S, f"{fault}: the load did not go on without {node.name}")
    restarted = time.monotonic()
    node.start()
    in_sync(cluster.url, topics)
    load.wait_ok(STEADY, time.monotonic(), f"{fault}: the load did not go on after {node.name} came back")
    return load.stall(fault, node.name, killed, restarted, time.monotonic())


def broker_memory_mb(cluster: KafkaCluster) -> dict[str, float]:
    """RSS of each node's JVM (the java process running in the node's directory)."""
    found = {}
    for process in psutil.process_iter(["name", "cwd", "memory_info"]):
        for node in cluster.nodes:
            if process.info["name"] == "java" and process.info["cwd"] == str(node.work_dir):
                found[node.name] = process.info["memory_info"].rss / 2**20
    return found


@pytest.fixture(scope="module")
def outcome(kafka_cluster, server) -> Iterator[Outcome]:
    admin = Admin(server)
    clients = []
    for _ in range(PROJECTS):
        project = admin.project()
        clients.append(Api(server, admin.key(project, SERVICE), project))
        assert clients[-1].put("/projects/config", json=CONFIG).status_code == 200
    topics = [EVENTS_TOPIC, DLQ_TOPIC, *INTERNAL_TOPICS]
    workers_restarted = 0
    with LagProbe(kafka_cluster.url, Settings().worker_group_id) as lag, Load(clients) as load:
        controller = kafka_cluster.active_controller()
        coordinator = kafka_cluster.nodes[transaction_coordinator(kafka_cluster.url) - 1]
        broker = (
            coordinator
            if coordinator is not controller
            else next(n for n in kafka_cluster.nodes if n is not controller)
        )
        what = "the transactions' coordinator" if broker is coordinator else "a broker"
        stalls = [lose(kafka_cluster, broker, load, f"{what}, not the controller", topics)]
        stalls.append(lose(kafka_cluster, kafka_cluster.active_controller(), load, "the active controller", topics))
    if server.processes["workers"].poll() is not None:  # (by design on a failed offset commit: to be restarted)
        server.start_workers()
        workers_restarted += 1
    expected = {}
    for client in clients:
        # Published after every other batch of the project, one on each partition (conversions spread by user):
        # once all are processed, everything before them was.
        markers = drain_markers(client.project_id)
        assert client.post("/events/batch", json={"events": markers}).status_code == 200
        client.wait_processed(*(marker["dedup_id"] for marker in markers), timeout_s=120)
        expected[client.project_id] = EVENTS_PER_BATCH * len(load.accepted[client.project_id]) + len(markers)
    result = Outcome(stalls, load, lag, expected, clients, workers_restarted, broker_memory_mb(kafka_cluster))
    print("\n" + "\n".join(str(stall) for stall in stalls))
    statuses = Counter(answer.status for answer in load.answers)
    print(f"batches refused at least once, then accepted: {load.batches_refused}; answers {dict(statuses)}")
    print(f"lag measures: {dict(Counter(o if not o.isdigit() else 'answered' for _, o in lag.outcomes))}")
    print(f"brokers' RSS (MB): {json.dumps({k: round(v) for k, v in result.memory_mb.items()})}")
    yield result
    for client in clients:
        client.close()


@pytest.mark.cluster
def test_the_ingest_edge_answers_503_while_stalled_and_never_crashes(outcome, server):
    assert outcome.load.batches_refused > 0, "no batch refused: the faults would prove nothing"
    assert outcome.load.batches_given_up == 0
    for response in outcome.load.refusals:
        assert_log_unavailable(response)
    assert server.processes["ingest"].poll() is None and server.processes["query"].poll() is None
    assert outcome.workers_restarted == 0, "the workers exited during the faults"


@pytest.mark.cluster
def test_every_event_is_paid_exactly_once(outcome, clickhouse_url):
    warehouse = connect(clickhouse_url)
    for client in outcome.clients:
        expected, p = outcome.expected[client.project_id], {"p": client.project_id}
        conversions = warehouse.query(
            "SELECT count(), uniqExact(dedup_id) FROM conversions WHERE project_id = {p:String}", p
        ).first_row
        paid = warehouse.query(
            "SELECT count(), uniqExact(source_id) FROM payouts"
            " WHERE project_id = {p:String} AND kind = 'end_user_reward'",
            p,
        ).first_row
        assert conversions == (expected, expected)
        assert paid == (expected, expected)
        summary = client.get("/payouts/summary", params={"currency": "point"}).json()
        assert summary == {"total_payouts": str(expected * POINTS_PER_EVENT)}


@pytest.mark.cluster
def test_the_lag_reader_answers_or_gives_up_in_time_with_a_broker_down(outcome):
    """Never NodeNotReadyError (a dead broker asked) or any error but a timeout, which the edge's back-pressure
    takes as "keep the last measure"; and it answered while a broker was down, once leadership had moved."""
    assert {o for _, o in outcome.lag.outcomes if not o.isdigit()} <= {"TimeoutError"}
    for stall in outcome.stalls:
        assert outcome.lag.answered_between(stall.killed_at, stall.restarted_at) > 0, stall.fault
