"""Redis losing its last second (issue 11 item 5), in the production shape on real engines and processes.

With `appendfsync everysec` a crash of the machine forgets up to a second of Redis's writes (dedup markers, code
uses, processed marks, the workers' delivery plans). A SIGKILL of the Redis process alone forgets nothing (its
writes are in the kernel), so the test crashes Redis as the machine would: under a steady load it copies Redis's
append-only files (the state of a second before the crash), keeps the load going for a second, SIGKILLs Redis, puts
the copy in place of its files and starts it again on the same port. Then every batch ever sent is sent again until
answered 200, and every code use until answered (200, or 409/422 once Redis knows the user or the code is full
again). Once the pipeline has drained: every event paid exactly once, and the code (`max_uses = K`) referring at
most K users, each paid once.

Twice: Redis alone, and Redis with the workers (the same machine), SIGKILLed a moment before it and started again
only after the retries: the batches accepted in between were neither remembered by Redis nor written to the
warehouse, so the edge accepts their retries again and publishes them twice, and the workers read their last
delivery again.

The copy is taken between two batches: a batch in flight then would be claimed (`pending`) in the copy and
answered 200 after it, and its retries would be answered 503 until the claim lapses (PENDING_TTL_S, a minute).

This module runs its own Kafka broker besides its own Redis: the session's workers would otherwise read this
project's records with the session's Redis, and this test's workers every other test's records with this one.
"""

import asyncio
import shutil
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest
import redis
from aiokafka import AIOKafkaConsumer, TopicPartition

from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_state import open_redis_state
from rewards.adapters.production.redis_state.ingest import PENDING_TTL_S
from rewards.devengines import Engine, EngineFailed, EngineUnavailable, redis_engine
from rewards.devengines.clickhouse import connect
from rewards.domain.payouts import User
from rewards.settings import Settings
from schemas.records import CodeUseRecord, ConversionRecord, load_records
from schemas.topics import EVENTS_TOPIC
from tests.conftest import SERVICE, event, evm
from tests.runtime.test_production_faults import assert_log_unavailable
from tests.support.harness import Admin, Api, ProductionServer
from tests.support.kafka_helpers import drain_markers
from tests.support.real_engines import _own_engine, missing

POINTS_PER_EVENT = 7
REFERRER_REWARD, REFERRED_REWARD = 5, 3
CONFIG = {
    "default_tier": None,
    "tiers": [],
    "conversions": [{"event_name": "purchase", "base": {"fixed": "7"}, "end_user_reward": {"rate": "1"}}],
    "referral_reward": {"referrer": str(REFERRER_REWARD), "referred": str(REFERRED_REWARD)},
}
MAX_USES = 60  # more than the uses before the crash and in its lost second together: the code is full after it
EVENTS_PER_BATCH, REPEATED = 20, 5  # each batch repeats the last REPEATED events of the one before
PACE_S = 0.03  # between two requests of each client of the load
OWNER = evm(150)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory) -> Iterator:
    yield from _own_engine("kafka", tmp_path_factory.mktemp("redis-loss-kafka"))


@pytest.fixture(scope="module")
def crash_redis(tmp_path_factory) -> Iterator[Engine]:
    """A Redis of this module only, fsyncing its AOF every second: a local process (the test replaces its files)."""
    try:
        engine = redis_engine(tmp_path_factory.mktemp("redis-loss-redis"))
    except EngineUnavailable as error:
        missing(f"redis: no local redis-server to crash ({error})")
    engine.command += ["--appendfsync", "everysec", "--aof-load-truncated", "yes"]
    try:
        engine.start()
    except EngineFailed as error:
        missing(f"redis: the local redis-server did not start ({error})")
    yield engine
    engine.stop()


@pytest.fixture(scope="module")
def server(kafka, crash_redis, clickhouse_url) -> Iterator[ProductionServer]:
    engines = {"KAFKA_BOOTSTRAP_SERVERS": kafka.url, "REDIS_URL": crash_redis.url, "CLICKHOUSE_URL": clickhouse_url}
    # One key sends every batch (the load, then its retries): the contract's 10 a minute would hold it back.
    # The killed workers' partitions move to the new ones after the session timeout: Kafka's floor.
    env = {"REWARDS_RATE_LIMITS": '{"events_batch": "100000/minute"}', "REWARDS_WORKER_SESSION_TIMEOUT_S": "6"}
    server = ProductionServer(engines, env=env).start()
    yield server
    server.stop()


def poll(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} (in {timeout_s:.0f} s)"
        time.sleep(0.01)


def use(api: Api, code: str, user: str) -> httpx.Response:
    return api.patch(
        f"/referral_codes/{code}/use", json={"user_identifier": user, "user_identifier_type": "evm_address"}
    )


def until_answered(
    request: Callable[[], httpx.Response], final: set[int], seen: Counter, timeout_s: float = PENDING_TTL_S + 30
):
    """Send `request` again after each 503 (waiting its Retry-After) until it is answered one of `final`. A batch
    answered 503 after its events were published (its commit in Redis failed) keeps them claimed for PENDING_TTL_S."""
    deadline = time.monotonic() + timeout_s
    while (response := request()).status_code not in final:
        seen[response.status_code] += 1
        assert_log_unavailable(response)
        assert time.monotonic() < deadline, f"still 503 after {timeout_s} s: {response.text}"
        time.sleep(float(response.headers["Retry-After"]))
    seen[response.status_code] += 1
    return response


class Load:
    """Two clients at a steady pace until stopped, each request and answer kept: batches of events, and uses of
    one code by new users, one each. `phase` labels the answers: before the crash, outage, after the crash."""

    def __init__(self, server: ProductionServer, api_key: str, project_id: str, code: str):
        self._client = lambda: Api(server, api_key, project_id)
        self.code = code
        self.batches: list[dict] = []  # every body sent, in order
        self.accepted: list[tuple[str, dict]] = []  # (phase, body) of the batches answered 200
        self.users: list[str] = []  # every user who tried the code, in order
        self.seen: Counter = Counter()  # (phase, "batch" | "use", status)
        self.unavailable: list[httpx.Response] = []  # the 5xx answers
        self.phase = "before the crash"
        self.batch_lock = threading.Lock()  # held while a batch is in flight
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(job,)) for job in (self._batch, self._use)]

    def __enter__(self) -> "Load":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    def answered(self, what: str, status: int | None = None, phase: str | None = None) -> int:
        """How many requests of `what` were answered `status` (any 5xx when None), in `phase` (any when None)."""
        return sum(
            n
            for (p, w, s), n in self.seen.items()
            if w == what and phase in (None, p) and (s == status if status is not None else s >= 500)
        )

    def _run(self, job: Callable[[Api], None]) -> None:
        with self._client() as api:
            while not self._stop.is_set():
                job(api)
                time.sleep(PACE_S)

    def _batch(self, api: Api) -> None:
        first = len(self.batches) * (EVENTS_PER_BATCH - REPEATED)
        body = {"events": [event(f"e-{n}", user=evm(n % 100)) for n in range(first, first + EVENTS_PER_BATCH)]}
        self.batches.append(body)
        with self.batch_lock:
            phase, response = self.phase, api.post("/events/batch", json=body)
        if response.status_code == 200:
            self.accepted.append((phase, body))
        self._note("batch", response)

    def _use(self, api: Api) -> None:
        self.users.append(f"0x{0x10000 + len(self.users):040x}")
        self._note("use", use(api, self.code, self.users[-1]))

    def _note(self, what: str, response: httpx.Response) -> None:
        self.seen[(self.phase, what, response.status_code)] += 1
        if response.status_code >= 500:
            self.unavailable.append(response)


def crash(server: ProductionServer, redis_engine: Engine, load: Load, copy_dir, with_workers: bool) -> None:
    """Lose Redis's last second under `load`, as a crash of its machine would (and the workers with it if
    `with_workers`), and start Redis again (not the workers)."""
    aof = redis_engine.work_dir / "appendonlydir"
    with load.batch_lock:  # between two batches: see the module's notes
        shutil.copytree(aof, copy_dir)
    copied_at, before = time.monotonic(), (load.answered("batch", 200), load.answered("use", 200))
    poll(
        lambda: (
            time.monotonic() - copied_at >= 1
            and load.answered("batch", 200) >= before[0] + 5
            and load.answered("use", 200) >= before[1] + 5
        ),
        "the load did not go on after the copy",
    )
    if with_workers:
        server.processes["workers"].send_signal(signal.SIGKILL)
        server.processes["workers"].wait()
        before = load.answered("batch", 200), load.answered("use", 200)  # none of these will have been written
        poll(
            lambda: load.answered("batch", 200) >= before[0] + 3 and load.answered("use", 200) >= before[1] + 3,
            "the load did not go on after the workers died",
        )
    load.phase = "outage"
    redis_engine.kill()
    shutil.rmtree(aof)
    shutil.copytree(copy_dir, aof)
    poll(lambda: load.answered("batch", phase="outage") and load.answered("use", phase="outage"), "no outage seen")
    redis_engine.start()
    load.phase = "after the crash"


def forgotten(redis_url: str, project_id: str, dedup_ids: list[str]) -> int:
    """How many of these dedup ids Redis does not know."""
    keys = ProjectKeys(project_id)
    with redis.Redis.from_url(redis_url) as client:
        return client.mget([keys.dedup(d) for d in dedup_ids]).count(None)


def published(bootstrap: str, project_id: str) -> Counter:
    """The project's records on the events topic: how many conversions, and how many code uses."""

    async def read() -> Counter:
        # A group (never joined, nothing committed): aiokafka 0.14's consumer without one raises CancelledError
        # from stop().
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, isolation_level="read_committed", group_id="test", enable_auto_commit=False
        )
        await consumer.start()
        try:
            partitions = [TopicPartition(EVENTS_TOPIC, p) for p in range(Settings().events_partitions)]
            consumer.assign(partitions)
            for partition in partitions:
                consumer.seek(partition, 0)
            end, found = await consumer.end_offsets(partitions), Counter()
            while [tp for tp in partitions if await consumer.position(tp) < end[tp]]:
                for messages in (await consumer.getmany(timeout_ms=1000)).values():
                    for message in messages:  # (a batch's conversions spread over the partitions, unkeyed)
                        records = load_records(message.value)
                        found.update(type(r).__name__ for r in records if r.project_id == project_id)
            return found
        finally:
            await consumer.stop()

    return asyncio.run(read())


@dataclass
class Crashed:
    """What the load sent and what the warehouse and the topic hold once the pipeline drained."""

    workers_died: bool
    api: Api
    code: str
    load: Load
    unique: set[str]  # the dedup ids of every batch
    conversions: tuple[int, int]  # rows, distinct dedup ids
    end_user_rewards: tuple[int, int]  # payouts, distinct sources
    referral_rewards: int  # payouts
    referrals: tuple[int, int]  # of the code: rows, distinct users
    refused: int  # code uses set aside as dead letters
    published: Counter  # the project's records on the topic, by type


def _uses_written(warehouse, p: dict) -> int:
    """The code's uses written: as referrals, or set aside as dead letters."""
    return warehouse.query(
        "SELECT (SELECT count() FROM referrals WHERE project_id = {p:String} AND code = {c:String})"
        " + (SELECT count() FROM dead_letters WHERE project_id = {p:String} AND record_type = 'code_use')",
        p,
    ).first_row[0]


@pytest.fixture(scope="module", params=["redis", "redis and workers"])
def crashed(request, server, kafka, crash_redis, clickhouse_url, tmp_path_factory) -> Iterator[Crashed]:
    workers_die = request.param == "redis and workers"
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, SERVICE), project)
    configured = api.put("/projects/config", json=CONFIG)
    assert configured.status_code == 200, configured.text
    owner = {"user_identifier": OWNER, "user_identifier_type": "evm_address"}
    created = api.post("/referral_codes", json={**owner, "quantity": 1, "max_uses": MAX_USES})
    assert created.status_code == 201, created.text
    code = created.json()[0]["code"]

    with Load(server, api.api_key, project, code) as load:
        poll(lambda: load.answered("batch", 200) >= 10 and load.answered("use", 200) >= 10, "no load")
        copy = tmp_path_factory.mktemp("redis-loss-copy") / "appendonlydir"
        crash(server, crash_redis, load, copy, with_workers=workers_die)
        # What the crash made Redis forget: uses it answered 200 for, ids of batches it answered 200 for.
        uses_answered = load.answered("use", 200)
        uses_kept = until_answered(lambda: api.get(f"/referral_codes/{code}"), {200}, Counter()).json()["current_uses"]
        ids = [e["dedup_id"] for phase, body in load.accepted if phase != "after the crash" for e in body["events"]]
        ids_forgotten = forgotten(crash_redis.url, project, ids)
        poll(lambda: load.answered("use", 422, "after the crash"), "the code is not full again after the crash")
        poll(lambda: load.answered("batch", 200, "after the crash") >= 5, "no batch accepted after the crash")
        # The code is full again: each use answered 200 past MAX_USES is one Redis forgot (uses_kept, read while
        # the load goes on, may already count uses made after the restart).
        uses_lost = load.answered("use", 200) - MAX_USES
    assert uses_lost > 0 and ids_forgotten > 0, "the crash lost nothing: the test would prove nothing"

    retried = {"batch": Counter(), "use": Counter()}

    def send_again(body: dict) -> httpx.Response:
        return until_answered(lambda: api.post("/events/batch", json=body), {200}, retried["batch"])

    def use_again(user: str) -> httpx.Response:
        return until_answered(lambda: use(api, code, user), {200, 409, 422}, retried["use"])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(send_again, load.batches))
        list(pool.map(use_again, load.users))
    if workers_die:
        server.start_workers()
    # Published after every other record of the project, one on each partition (a batch's conversions spread over
    # them by user, the code uses on the project's): once all are processed, everything before them was.
    markers = drain_markers(project)
    assert api.post("/events/batch", json={"events": markers}).json() == {"ingested_events": len(markers)}
    api.wait_processed(*(marker["dedup_id"] for marker in markers), timeout_s=60)
    assert server.processes["workers"].poll() is None, "the workers exited"

    warehouse, p = connect(clickhouse_url), {"p": project, "c": code}
    # A use the outbox relay publishes again after the crash may land after the markers: wait (30 s at most) until every
    # published use is written one way or the other before reading; a use lost for good still fails the test below.
    deadline = time.monotonic() + 30
    while _uses_written(warehouse, p) < published(kafka.url, project)[CodeUseRecord.__name__]:
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    paid = warehouse.query(
        "SELECT countIf(kind = 'end_user_reward'), uniqExactIf(source_id, kind = 'end_user_reward'),"
        " countIf(kind = 'referral_reward') FROM payouts WHERE project_id = {p:String}",
        p,
    ).first_row
    crashed = Crashed(
        workers_die,
        api,
        code,
        load,
        unique={e["dedup_id"] for body in [*load.batches, {"events": markers}] for e in body["events"]},
        conversions=warehouse.query(
            "SELECT count(), uniqExact(dedup_id) FROM conversions WHERE project_id = {p:String}", p
        ).first_row,
        end_user_rewards=paid[:2],
        referral_rewards=paid[2],
        referrals=warehouse.query(
            "SELECT count(), uniqExact(user_identifier) FROM referrals"
            " WHERE project_id = {p:String} AND code = {c:String}",
            p,
        ).first_row,
        refused=warehouse.query(
            "SELECT count() FROM dead_letters WHERE project_id = {p:String} AND record_type = 'code_use'", p
        ).first_row[0],
        published=published(kafka.url, project),
    )
    print(
        f"\n{request.param}: load: {dict(load.seen)}\nretries: {retried}\n"
        f"code uses answered 200 before the kill {uses_answered}, "
        f"current_uses after the restart {uses_kept}; dedup ids forgotten {ids_forgotten} of {len(ids)}\n"
        f"published {dict(crashed.published)}; unique events {len(crashed.unique)}, referrals {crashed.referrals}, "
        f"uses refused {crashed.refused}"
    )
    yield crashed
    api.close()


def test_during_the_outage_the_api_answers_503_with_retry_after(crashed):
    """Redis down or loading (and a connection to the Redis before the crash): a 503 to retry, never a 500."""
    assert crashed.load.answered("batch", phase="outage") and crashed.load.answered("use", phase="outage")
    for response in crashed.load.unavailable:
        assert_log_unavailable(response)


def test_every_event_is_paid_exactly_once(crashed):
    unique = len(crashed.unique)
    if crashed.workers_died:
        assert crashed.published[ConversionRecord.__name__] > unique  # the workers were given some twice
    assert crashed.conversions == (unique, unique)
    assert crashed.end_user_rewards == (unique, unique)
    summary = until_answered(
        lambda: crashed.api.get("/payouts/summary", params={"currency": "point"}), {200}, Counter()
    ).json()
    referrals = crashed.referrals[0]
    total = unique * POINTS_PER_EVENT + referrals * (REFERRER_REWARD + REFERRED_REWARD)
    assert summary == {"total_payouts": str(total)}


def test_no_code_is_used_past_its_max_uses_and_each_referral_is_paid_once(crashed):
    referrals, referred = crashed.referrals
    assert referred == referrals <= MAX_USES  # no user referred twice, no use past max_uses
    assert referrals + crashed.refused == crashed.published[CodeUseRecord.__name__]  # each use written one way
    code = crashed.api.get(f"/referral_codes/{crashed.code}").json()
    assert code["current_uses"] == MAX_USES and not code["available"]  # Redis's count: full again
    assert crashed.referral_rewards == 2 * referrals  # the referrer and the referred, once per referral
    totals = until_answered(
        lambda: crashed.api.get(f"/payouts/totals/{OWNER}", params={"identifier_type": "evm_address"}), {200}, Counter()
    ).json()
    assert totals["by_kind"]["referral_reward"] == str(referrals * REFERRER_REWARD)


def test_every_event_reads_processed(crashed):
    def status(dedup_id: str) -> str:
        request = lambda: crashed.api.get("/events/status", params={"dedup_id": dedup_id})  # noqa: E731
        return until_answered(request, {200}, Counter()).json()["status"]

    with ThreadPoolExecutor(8) as pool:
        statuses = Counter(pool.map(status, sorted(crashed.unique)))
    assert statuses == {"processed": len(crashed.unique)}


async def test_a_batch_whose_commit_fails_once_is_accepted(tmp_path):
    """A batch on the log whose commit in Redis fails (here on a connection from before a restart of Redis) is
    committed again, not answered 503 with its ids left claimed (its retries would answer 503 for a minute)."""
    try:
        engine = redis_engine(tmp_path).start()
    except (EngineUnavailable, EngineFailed) as error:
        missing(f"redis: no local redis-server ({error})")
    state = await open_redis_state(engine.url)
    try:
        pool = state._redis
        await asyncio.gather(*(pool.blpop(["nothing"], timeout=0.2) for _ in range(3)))  # three pooled connections
        engine.restart()  # the data kept; the three connections are the old server's
        with pytest.raises(redis.ConnectionError):
            await pool.ping()  # the last used: found closed, and opened again by the next command
        user = User(evm(1), "evm_address")
        async with state.ingest("p", ["e-1"], [(user, "purchase")], None) as claim:
            assert claim.fresh == [0]  # (the events would be published here)
            # Another request holds the good connection: the commit takes one of the old server's.
            other = asyncio.create_task(pool.blpop(["nothing"], timeout=0.5))
            await asyncio.sleep(0.1)
        await other
        assert await state.event_status("p", "e-1") == "accepted"  # committed on the second try
        async with state.ingest("p", ["e-1"], [(user, "purchase")], None) as claim:  # a retry: a duplicate
            assert claim.fresh == []
    finally:
        await state.close()
        engine.stop()
