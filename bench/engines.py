"""Engine ceilings (issue 12): what each engine alone sustains on this machine for the very work one batch
needs, measured in the same run as the pipeline, so that each pipeline figure reads as a share of the slowest
engine it depends on (`ceiling_figures`): that is the honest limit on this hardware.

Every measurement runs in spawned processes of the suite's own (kept for the suite, so that each measurement does
not pay for its imports), set up and warmed up, then started together for the same few seconds; events/s is all
their events over that time. Where a client's concurrency or process count matters, a few are tried and the best
is kept (the others are named in the case). The clients are the service's own, with its settings:

- **Redis claim** (production accept): `RedisStateStore.ingest` as the ingest edge runs it per 100-event batch
  (rewards.adapters.production.redis_state: claim_batch.lua on 100 fresh dedup keys of one project, then
  commit_batch.lua of them with the users' event sets, scripts registered by `Scripts.register`), opened by
  `open_redis_state` on redis-py's asyncio client (hiredis), but without the warehouse's dedup archive: Redis alone.
  In a database of its own, flushed after. Baseline: redis-benchmark (C, 50 connections) running the same two scripts
  on random fresh keys.
- **Kafka transactional produce** (production accept) of the batches as the ingest edge serializes them (bench.load's
  events, validated, `schemas.records.dump_conversions`), on a topic of its own (deleted after):
  - Kafka's own `org.apache.kafka.tools.ProducerPerformance` (kafka-tools, fetched once:
    `rewards.devengines.kafka.tools_classpath`): one transactional producer committing every TOOL_TRANSACTION_MS,
    kafka_log's producer settings (lz4, acks=all, idempotent, 1 MB batches), the same batches as records. The
    baseline of the rows below;
  - plain aiokafka producers as kafka_log starts them, at 1, 8 and 32 batches per transaction: what batching per
    transaction buys;
  - `KafkaEventLog` itself (its producer pool and group commit, as the ingest API runs it) under 64 concurrent
    publishes (the load's 64 connections), from 1 process and from one per core.
- **Kafka consume** (production processing): one aiokafka consumer, read_committed as the workers read, over the
  topic written above (fetching only: decoding records is the workers' own work).
- **ClickHouse insert of one delivery's rows** (production processing): the inserts
  `stream_workers.processor.process_delivery` makes for a full delivery (REWARDS_WORKER_BATCH_SIZE records: 100-event
  batches over 4 projects, 5% of the users referred through a 4-level chain), recorded by running it on a SQLite
  state store against a warehouse that records them, then made by `ClickHouseWarehouse.insert` in the same order
  under fresh tokens, in a database of its own (created, migrated and dropped), from 1 and more clients.
- **Embedded:** the SQLite claim with its outbox write per batch (`SqliteStateStore.ingest` with
  `SqliteOutbox.publish` inside, as `accept_events` does; embedded accept), and the inserts of a delivery of the
  embedded worker's size (MAX_DELIVERIES batches) into chdb (`ChdbWarehouse.insert`; embedded processing).

`ceiling_figures` then gives each pipeline figure of the ingest suite (accepted and processed events/s, per shape)
as a ratio to the slowest engine it depends on (DEPENDS), each engine as the service's own client reaches it.
"""

import asyncio
import itertools
import multiprocessing
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

from bench.context import Context
from bench.report import Figure
from bench.workers import CONFIG  # the same payout configuration as the workers suite

SECTION = "ceiling"
BATCH = 100  # events per batch (bench.load.BATCH)
REDIS_DB = 13  # bench.dedup uses 15, bench.workers 14
DATABASE = "bench_engines"
TOPIC_PREFIX = "bench.engines"
TRANSACTIONAL_PREFIX = "bench-engines"  # fixed: each run fences (and so reuses) the last run's ids
PROJECTS = 8  # as the ingest load
PAYLOADS = 32  # distinct serialized batches, cycled
LOG_PUBLISHES = 64  # concurrent KafkaEventLog publishes: the load's 64 connections
PLAIN_PRODUCERS = 4
PER_TRANSACTION = (1, 8, 32)
TOOL_TRANSACTION_MS = 100
DELIVERY_PROJECTS = 4
REFERRED_SHARE = 0.05
TARGET_SHARE = 0.5
WARM_UP_S = 0.25  # of each loop before a measurement, after its set-up
TARGET = f"≥ {TARGET_SHARE} of the slowest engine"

# Case labels: every figure of this suite starts with one (ceiling_figures finds them by it).
REDIS = "Redis claim"
REDIS_TOOL = "redis-benchmark, same scripts"
KAFKA_TOOL = "Kafka transactional produce, ProducerPerformance"
KAFKA_PLAIN = "Kafka transactional produce, plain aiokafka"
KAFKA_LOG = "Kafka transactional produce, KafkaEventLog"
KAFKA_CONSUME = "Kafka consume"
CLICKHOUSE = "ClickHouse insert"
CHDB = "chdb insert"
SQLITE = "SQLite claim + outbox"

# The ingest suite's pipeline figures (bench/ingest.py), by the start of their case.
ACCEPTED = "POST /events/batch, "
PROCESSED = "processed events/s"
# The engines each pipeline figure depends on, through the service's own clients.
DEPENDS = {
    ("production", ACCEPTED): (REDIS, KAFKA_LOG),
    ("production", PROCESSED): (CLICKHOUSE, KAFKA_CONSUME),
    ("embedded", ACCEPTED): (SQLITE,),
    ("embedded", PROCESSED): (CHDB,),
}
PIPELINE_NAMES = {ACCEPTED: "accepted events/s (POST /events/batch)", PROCESSED: "processed events/s"}


# -- the ratios ---------------------------------------------------------------------------------


def ceiling_figures(figures: list[Figure]) -> list[Figure]:
    """For each pipeline figure of the ingest suite among `figures` (accepted and processed events/s, per shape),
    a figure of its ratio to the slowest engine it depends on (DEPENDS) among the engine figures of `figures`.
    Pure: pipeline figures without any engine figure measured, and engine figures without a pipeline, give none."""
    engines = {}
    for f in figures:
        if f.section == SECTION and f.unit == "events/s" and f.result > 0:
            for label in {label for labels in DEPENDS.values() for label in labels}:
                if f.case.startswith(label) and (label not in engines or f.result > engines[label].result):
                    engines[label] = f  # the best of a label measured more than once
    ceilings = []
    for f in figures:
        if f.section != "ingest" or f.unit != "events/s":
            continue
        for (shape, start), labels in DEPENDS.items():
            if f.shape != shape or not f.case.startswith(start):
                continue
            measured = [engines[label] for label in labels if label in engines]
            if not measured:
                continue
            slowest = min(measured, key=lambda e: e.result)
            name = _engine_name(slowest)
            ratio = f.result / slowest.result
            considered = ", ".join(label for label in labels if label in engines)
            ceilings.append(
                Figure(SECTION, f"{PIPELINE_NAMES[start]} ÷ the slowest engine it depends on (of: {considered})",
                       shape, f.result, "events/s", baseline_name=name, baseline=slowest.result, ratio=ratio,
                       ratio_note=f"of {name}", target=TARGET, met=ratio >= TARGET_SHARE)
            )  # fmt: skip
    return ceilings


def _engine_name(figure: Figure) -> str:
    return next(label for labels in DEPENDS.values() for label in labels if figure.case.startswith(label))


# -- the run ---------------------------------------------------------------------------------------


def run(context: Context) -> list[Figure]:
    seconds, quick, env = context.size(6.0, 1.0, 0.3), context.quick, context.engine_env
    deliveries = context.size(4, 2, 2)  # distinct ones, cycled (each inserted under a fresh token)
    pool = _Processes(max(2, os.cpu_count() or 1))
    try:
        figures = _redis(pool, env["REDIS_URL"], seconds, quick)
        figures += _kafka(pool, env["KAFKA_BOOTSTRAP_SERVERS"], seconds)
        production = asyncio.run(_deliveries(deliveries, _delivery_messages("production")))
        figures += _clickhouse(pool, env["CLICKHOUSE_URL"], seconds, quick, production)
        embedded = asyncio.run(_deliveries(deliveries // 2, _delivery_messages("embedded")))
        figures += _embedded(pool, context.data_root, seconds, quick, embedded)
    finally:
        pool.close()
    return figures


def _redis(pool: "_Processes", url: str, seconds: float, quick: bool) -> list[Figure]:
    url = urlsplit(url)._replace(path=f"/{REDIS_DB}").geturl()
    # (open_redis_state's pool allows 100 connections per process, as in the ingest edge)
    shapes = [(1, 32), (2, 32)] if quick else [(1, 8), (1, 32), (1, 64), (2, 32), (2, 64)]
    tried = {}
    try:
        for processes, connections in shapes:
            _flush(url)
            params = {"url": url, "connections": connections, "seconds": seconds}
            tried[(processes, connections)] = _rate(pool.run("redis_claims", params, processes))
        _flush(url)
        tool = _redis_benchmark(url, seconds, max(tried.values()))
    finally:
        _flush(url)
    (processes, connections), best = max(tried.items(), key=lambda item: item[1])
    case = (
        f"{REDIS}: CLAIM_BATCH + COMMIT_BATCH per 100-event batch (100 fresh dedup keys, 100 user sets), "
        f"redis-py asyncio, {_best(tried, (processes, connections), 'processes × connections')}"
    )
    return [_figure(case, "production", best, REDIS_TOOL, tool)]


def _flush(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def _redis_benchmark(url: str, seconds: float, guess_events_s: float) -> float | None:
    """events/s of redis-benchmark running the same two scripts on 100 random (fresh) keys each, one after the
    other (each for about `seconds`): 100 / (the time of a claim + the time of a commit)."""
    import redis

    from bench.load import USERS
    from rewards.adapters.production.redis_keys import ProjectKeys
    from rewards.adapters.production.redis_scripts import source
    from rewards.adapters.production.redis_state.ingest import PENDING_TTL_S
    from rewards.domain.payouts import User
    from rewards.settings import Settings

    binary = shutil.which("redis-benchmark")
    if binary is None:
        return None
    client = redis.Redis.from_url(url)
    try:
        claim_sha, commit_sha = client.script_load(source("claim_batch")), client.script_load(source("commit_batch"))
    finally:
        client.close()
    k = ProjectKeys(f"bench-engines-{uuid.uuid4().hex[:8]}")
    keys = [k.dedup(f"rb-__rand_int__-{i}") for i in range(BATCH)]
    user_sets = [k.user_events(User(user, "evm_address")) for user in USERS[:BATCH]]
    settings = Settings()
    window_ms, idempotency_ms = int(settings.dedup_window * 1000), int(settings.idempotency_ttl * 1000)
    claim = ["EVALSHA", claim_sha, str(1 + BATCH), k.idempotency(""), *keys, "rb", str(PENDING_TTL_S * 1000), "0", ""]
    commit = ["EVALSHA", commit_sha, str(1 + 2 * BATCH), k.idempotency(""), *keys, *user_sets, "rb", str(BATCH),
              "", "", "", str(idempotency_ms), str(window_ms), *["purchase"] * BATCH]  # fmt: skip
    parts = urlsplit(url)
    base = [binary, "-h", parts.hostname, "-p", str(parts.port), "--dbnum", str(REDIS_DB), "-c", "50", "--csv"]
    base += ["-r", "1000000000"]
    per_call_s = 0.0
    for command in (claim, commit):  # each for about `seconds` at the rate the asyncio clients reached
        per_call_s += 1 / _benchmark_rps(base, max(200, int(guess_events_s / BATCH * seconds)), command)
    return BATCH / per_call_s


def _benchmark_rps(base: list[str], requests: int, command: list[str]) -> float:
    result = subprocess.run([*base, "-n", str(requests), *command], capture_output=True, text=True, timeout=300)
    rows = [line for line in result.stdout.splitlines() if line.startswith('"EVALSHA')]
    if result.returncode != 0 or not rows:
        raise RuntimeError(f"redis-benchmark failed:\n{(result.stdout + result.stderr)[-2000:]}")
    return float(rows[-1].split(",")[1].strip('"'))


def _kafka(pool: "_Processes", bootstrap: str, seconds: float) -> list[Figure]:
    from rewards.adapters.production.kafka_log import MAX_REQUEST_BYTES
    from rewards.adapters.production.migrate import create_topic
    from rewards.settings import Settings

    topic = f"{TOPIC_PREFIX}.{uuid.uuid4().hex[:8]}"
    configs = {"max.message.bytes": str(MAX_REQUEST_BYTES)}
    asyncio.run(create_topic(bootstrap, Settings().events_partitions, 1, topic, configs))
    try:
        params = {"bootstrap": bootstrap, "topic": topic, "seconds": seconds}
        plain = pool.run("kafka_plain", params, 1)[0]["rates"]  # {batches per transaction: events/s}
        cores = os.cpu_count() or 1
        logs = {}
        for processes in sorted({1, cores}):
            publishes = {**params, "publishes": LOG_PUBLISHES // processes}
            logs[processes] = _rate(pool.run("kafka_log", publishes, processes))
        tool = _producer_performance(bootstrap, topic, seconds, 3 * max(*plain.values(), *logs.values()))
        consumed = _rate(pool.run("kafka_consume", params, 1))
    finally:
        asyncio.run(_delete_topic(bootstrap, topic))
    producers = Settings().producer_pool_size
    processes, best = max(logs.items(), key=lambda item: item[1])
    figures = []
    if tool is not None:
        figures.append(
            Figure(SECTION, f"{KAFKA_TOOL} (Java, kafka-tools), 1 producer, a transaction every {TOOL_TRANSACTION_MS} "
                   "ms, the same batches as records, kafka_log's settings (lz4, acks=all, idempotent)", "production",
                   tool, "events/s")
        )  # fmt: skip
    figures += [
        *(
            _figure(f"{KAFKA_PLAIN}, {PLAIN_PRODUCERS} producers, {n} batch{'es' if n > 1 else ''} per transaction",
                    "production", rate, "ProducerPerformance", tool)
            for n, rate in sorted(plain.items(), key=lambda item: int(item[0]))
        ),
        _figure(f"{KAFKA_LOG} (group commit, {producers} producers per process), {LOG_PUBLISHES} concurrent publishes, "
                f"{_best(logs, processes, 'processes')}", "production", best, "ProducerPerformance", tool),
        Figure(SECTION, f"{KAFKA_CONSUME}: one aiokafka consumer, read_committed, of the batches written above",
               "production", consumed, "events/s"),
    ]  # fmt: skip
    return figures


async def _delete_topic(bootstrap: str, topic: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
    finally:
        await admin.close()


def _producer_performance(bootstrap: str, topic: str, seconds: float, guess_events_s: float) -> float | None:
    """events/s of Kafka's own ProducerPerformance with a transactional id, on the same payloads."""
    from rewards.adapters.production import kafka_log
    from rewards.devengines.kafka import _java, tools_classpath

    try:
        java, classpath = _java(), tools_classpath()
    except RuntimeError as exc:  # no java or no Maven on this machine
        print(f"bench.engines: ProducerPerformance skipped: {exc}", file=sys.stderr)
        return None
    records = max(500, int(guess_events_s / BATCH * seconds))
    props = {
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": "true", "compression.type": "lz4",
        "batch.size": kafka_log.MAX_BATCH_BYTES, "max.request.size": kafka_log.MAX_REQUEST_BYTES, "linger.ms": 0,
        "request.timeout.ms": kafka_log.REQUEST_TIMEOUT_MS, "transaction.timeout.ms": kafka_log.TRANSACTION_TIMEOUT_MS,
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as directory:
        payloads = Path(directory) / "payloads.txt"
        payloads.write_bytes(b"\n".join(_payloads(PAYLOADS)[1]))  # a JSON array holds no newline
        command = [java, "-Xmx512m", "-XX:+UseSerialGC", "-cp", classpath, "org.apache.kafka.tools.ProducerPerformance",
                   "--topic", topic, "--num-records", str(records), "--throughput", "-1", "--payload-file",
                   str(payloads), "--transactional-id", f"{TRANSACTIONAL_PREFIX}-tool",
                   "--transaction-duration-ms", str(TOOL_TRANSACTION_MS),
                   "--producer-props", *(f"{k}={v}" for k, v in props.items())]  # fmt: skip
        rate = _run_tool(command, records)
        if records / rate < seconds / 2:  # too short to be steady: again, for about `seconds`
            rate = _run_tool(command, int(rate * seconds))
    return rate * BATCH


def _run_tool(command: list[str], records: int) -> float:
    """records/s ProducerPerformance reports for `records` records."""
    command = [*command]
    command[command.index("--num-records") + 1] = str(records)
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    found = re.findall(r"(\d+) records sent, ([\d.]+) records/sec", result.stdout)
    if result.returncode != 0 or not found:
        raise RuntimeError(f"ProducerPerformance failed:\n{(result.stdout + result.stderr)[-2000:]}")
    return float(found[-1][1])


def _clickhouse(pool: "_Processes", url: str, seconds: float, quick: bool, deliveries: list[dict]) -> list[Figure]:
    import clickhouse_connect

    from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse

    async def admin(sql: str) -> None:
        client = await clickhouse_connect.get_async_client(dsn=url)
        try:
            await client.command(sql)
        finally:
            await client.close()

    async def migrate() -> None:
        await admin(f"DROP DATABASE IF EXISTS {DATABASE} SYNC")
        await admin(f"CREATE DATABASE {DATABASE}")
        warehouse = await ClickHouseWarehouse.connect(url.rstrip("/") + f"/{DATABASE}")
        try:
            await warehouse.migrate()
        finally:
            await warehouse.close()

    tried = {}
    try:
        asyncio.run(migrate())
        for clients in (4,) if quick else (1, 2, 4):
            params = {"url": url.rstrip("/") + f"/{DATABASE}", "clients": clients, "seconds": seconds}
            tried[clients] = _rate(pool.run("clickhouse_inserts", {**params, "deliveries": deliveries}, 1))
    finally:
        asyncio.run(admin(f"DROP DATABASE IF EXISTS {DATABASE} SYNC"))
    clients, best = max(tried.items(), key=lambda item: item[1])
    case = (f"{CLICKHOUSE} of one delivery's rows ({_delivery_text(deliveries)}), ClickHouseWarehouse, "
            f"{_best(tried, clients, 'concurrent clients')}")  # fmt: skip
    return [Figure(SECTION, case, "production", best, "events/s")]


def _delivery_messages(shape: str) -> int:
    """The 100-event messages of a full delivery: REWARDS_WORKER_BATCH_SIZE records in production, the embedded
    worker's MAX_DELIVERIES messages."""
    from rewards.settings import Settings
    from stream_workers.runner import MAX_DELIVERIES

    return Settings().worker_batch_size // BATCH if shape == "production" else MAX_DELIVERIES


def _delivery_text(deliveries: list[dict]) -> str:
    tables = len({table for table, rows, _ in deliveries[0]["inserts"] if rows})
    return (
        f"{deliveries[0]['events']:,} records, {deliveries[0]['rows']:,} rows: one insert into each of {tables} tables"
    )


def _embedded(pool: "_Processes", data_root: Path, seconds: float, quick: bool, deliveries: list[dict]) -> list[Figure]:
    root = data_root / "ceiling"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-engines-", dir=root) as directory:
        sqlite = {}
        for concurrency in (16,) if quick else (1, 4, 16, 64):
            path = Path(directory) / f"state-{concurrency}.sqlite3"
            params = {"path": str(path), "seconds": seconds, "concurrency": concurrency}
            sqlite[concurrency] = _rate(pool.run("sqlite_claims", params, 1))
        # Last: chdb stays loaded in its process (one engine per process).
        params = {"path": str(Path(directory) / "warehouse"), "seconds": seconds, "deliveries": deliveries}
        chdb = _rate(pool.run("chdb_inserts", params, 1))
    concurrency, best = max(sqlite.items(), key=lambda item: item[1])
    return [
        Figure(SECTION, f"{CHDB} of one delivery's rows ({_delivery_text(deliveries)}), ChdbWarehouse", "embedded",
               chdb, "events/s"),
        Figure(SECTION, f"{SQLITE}: SqliteStateStore.ingest + SqliteOutbox.publish per 100-event batch (97 new ids), "
               f"{_best(sqlite, concurrency, 'concurrent requests')}", "embedded", best, "events/s"),
    ]  # fmt: skip


def _best(tried: dict, best, what: str) -> str:
    """What was tried (`what`: …), the best first, with the others' events/s."""

    def name(key) -> str:
        return "×".join(map(str, key)) if isinstance(key, tuple) else str(key)

    if len(tried) == 1:
        return f"{what}: {name(best)}"
    others = ", ".join(f"{name(key)}: {rate:,.0f}" for key, rate in tried.items() if key != best)
    return f"best of {what}: {name(best)} (others: {others})"


def _figure(case: str, shape: str, result: float, baseline_name: str, baseline: float | None) -> Figure:
    if not baseline:
        return Figure(SECTION, case, shape, result, "events/s")
    return Figure(SECTION, case, shape, result, "events/s", baseline_name=baseline_name, baseline=baseline,
                  ratio=result / baseline, ratio_note=f"of {baseline_name}")  # fmt: skip


# -- processes of their own -------------------------------------------------------------------


class _Processes:
    """Spawned processes, kept for the suite's measurements (each would otherwise spend a second importing): one
    measurement on the first n of them sets up in each, then all run at once, told to go when every one is ready."""

    def __init__(self, count: int):
        spawn = multiprocessing.get_context("spawn")
        self._answers = spawn.Queue()
        self._inboxes = [spawn.Queue() for _ in range(count)]
        self._processes = [spawn.Process(target=_serve, args=(inbox, self._answers), daemon=True)
                           for inbox in self._inboxes]  # fmt: skip
        for process in self._processes:
            process.start()

    def run(self, kind: str, params: dict, processes: int = 1) -> list[dict]:
        """`kind` in `processes` of them; each returns {"events": …, "seconds": …, …}."""
        for index in range(processes):
            self._inboxes[index].put((kind, {**params, "index": index}))
        ready = [self._answer(kind) for _ in range(processes)]  # set up (or failed)
        failed = [answer for answer in ready if answer[0] == "error"]
        for state, index, _ in ready:
            if state == "ready":
                self._inboxes[index].put("abort" if failed else "go")
        done = [self._answer(kind) for state, _, _ in ready if state == "ready"]
        failed += [answer for answer in done if answer[0] == "error"]
        if failed:
            raise RuntimeError(f"bench.engines {kind} failed: {failed[0][2]}")
        return [result for _, _, result in done]

    def _answer(self, kind: str) -> tuple[str, int, object]:
        deadline = time.monotonic() + 600
        while True:
            try:
                return self._answers.get(timeout=1)
            except queue.Empty:
                dead = [p for p in self._processes if not p.is_alive()]
                if dead or time.monotonic() > deadline:
                    raise RuntimeError(f"bench.engines {kind}: {'a process died' if dead else 'no answer'}") from None

    def close(self) -> None:
        for inbox in self._inboxes:
            inbox.put(None)
        for process in self._processes:
            process.join(30)
            if process.is_alive():
                process.kill()


def _serve(inbox, answers) -> None:
    """A spawned process: runs each measurement it is given until told to stop (None)."""
    import logging
    import traceback

    from rewards.logging import configure_logging

    configure_logging("warning", "console")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    while (task := inbox.get()) is not None:
        kind, params = task

        async def go(index: int = params["index"]) -> None:
            answers.put(("ready", index, None))
            if await asyncio.to_thread(inbox.get) != "go":
                raise RuntimeError("aborted: another process of the measurement failed")

        try:
            result = asyncio.run(WORKERS[kind](params, go))
        except BaseException as exc:
            answers.put(("error", params["index"], f"{exc!r}\n{traceback.format_exc()[-3000:]}"))
        else:
            answers.put(("done", params["index"], result))


def _rate(answers: list[dict]) -> float:
    """events/s of processes that ran at once: all their events over the longest of their times."""
    return sum(a["events"] for a in answers) / max(a["seconds"] for a in answers)


async def _for(seconds: float, loops: int, one: Callable[[int, int], Awaitable[int]]) -> tuple[int, float]:
    """`loops` concurrent loops, each calling `one(loop, n)` (n = 0, 1, …) until `seconds` are up; returns the
    events they reported and the time taken (to the end of the last call)."""
    started = time.perf_counter()
    stop = started + seconds
    events = 0

    async def loop(index: int) -> None:
        nonlocal events
        for n in itertools.count():
            if time.perf_counter() >= stop:
                return
            done = await one(index, n)  # not `events += await …`: that reads `events` before the wait
            events += done

    await asyncio.gather(*(loop(i) for i in range(loops)))
    return events, time.perf_counter() - started


# -- what one batch needs ----------------------------------------------------------------------------


def _payloads(count: int, project_ids: list[str] | None = None) -> tuple[list[str], list[bytes]]:
    """`count` batches as the ingest edge publishes them (validated, then dump_conversions), round-robin over
    PROJECTS projects: (the project of each, the payloads)."""
    import orjson

    from bench.load import batch_body
    from ingest_api.events.validation import parse_json, validate_batch
    from rewards.domain.timestamps import now_ms
    from schemas.records import dump_conversions

    project_ids = project_ids or [str(uuid.uuid4()) for _ in range(PROJECTS)]
    run = uuid.uuid4().hex[:8]
    projects, payloads = [], []
    for n in range(count):
        project = project_ids[n % len(project_ids)]
        events = validate_batch(parse_json(batch_body([f"{run}-{n}-{i}" for i in range(BATCH)], n)))
        payloads.append(dump_conversions(project, uuid.uuid4().hex, now_ms(), events))
        projects.append(project)
    assert all(b"\n" not in p for p in payloads) and orjson.loads(payloads[0])[0]["type"] == "conversion"
    return projects, payloads


class _Recorder:
    """A warehouse that records the inserts it is asked for and knows nothing (every id is new to it)."""

    def __init__(self):
        self.inserts: list[tuple[str, list[dict], str]] = []

    async def migrate(self) -> None:
        pass

    async def command(self, sql: str) -> None:
        pass

    async def insert(self, table: str, rows: list[dict], dedup_token: str) -> None:
        self.inserts.append((table, rows, dedup_token))

    async def query(self, sql: str, params: dict | None = None) -> list[dict]:
        return []

    async def close(self) -> None:
        pass


async def _deliveries(count: int, messages: int) -> list[dict]:
    """`count` deliveries of `messages` batches each (fresh ids), as the inserts
    `stream_workers.processor.process_delivery` makes for them: [(table, rows, token suffix)], with its events and
    rows. Their state: a SQLite state store of their own with the projects' configuration and a 4-level referral
    chain above REFERRED_SHARE of the users of each project."""
    from rewards.adapters.embedded.sqlite_db import SqliteDatabase
    from rewards.adapters.embedded.sqlite_state import SqliteStateStore
    from rewards.domain.payout_config import PayoutConfig
    from rewards.domain.payouts import User
    from rewards.ports import Delivery
    from schemas.records import decode_message
    from stream_workers.processor import process_delivery

    built = []
    with tempfile.TemporaryDirectory() as directory:
        state = SqliteStateStore(SqliteDatabase(Path(directory) / "state.sqlite3"))
        try:
            project_ids = [await state.create_project(f"bench-engines-{p}") for p in range(DELIVERY_PROJECTS)]
            deliveries = [_payloads(messages, project_ids)[1] for _ in range(count)]
            records = [[r for payload in payloads for r in decode_message(payload)] for payloads in deliveries]
            for number, project_id in enumerate(project_ids):
                await state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
                chain = [User(f"0x{0xAFF000 + number * 16 + level:040x}", "evm_address") for level in range(4)]
                codes = []
                for owner in chain:
                    async with state.create_codes(project_id, owner, 1, None) as change:
                        codes.append(change.value[0].code)
                for code, referred in zip(codes[1:], chain, strict=False):  # chain[1] referred chain[0], …
                    async with state.use_code(project_id, code, referred, {}):
                        pass
                users = sorted({r.user_identifier for r in records[0] if r.project_id == project_id})
                for user in users[: int(len(users) * REFERRED_SHARE)]:
                    async with state.use_code(project_id, codes[0], User(user, "evm_address"), {}):
                        pass
            for n, delivery_records in enumerate(records):
                recorder, token = _Recorder(), f"bench-engines-build-{n}"
                payouts = await process_delivery(Delivery(token, delivery_records), state, recorder)
                tables = {table: len(rows) for table, rows, _ in recorder.inserts}
                assert payouts > len(delivery_records) and not tables.get("dead_letters"), "pays as expected"
                inserts = [
                    (table, rows, dedup_token.removeprefix(token)) for table, rows, dedup_token in recorder.inserts
                ]
                built.append({"inserts": inserts, "events": len(delivery_records), "rows": sum(tables.values())})
        finally:
            await state.close()
    return built


async def _insert(warehouse, delivery: dict, token: str) -> int:
    """The delivery's inserts, in order, under a fresh token; returns its events."""
    for table, rows, suffix in delivery["inserts"]:
        await warehouse.insert(table, rows, token + suffix)
    return delivery["events"]


# -- the workers (each in a process of its own) ------------------------------------------------------


async def _redis_claims(params: dict, go: Callable[[], Awaitable[None]]) -> dict:
    from bench.load import USERS
    from rewards.adapters.production.redis_state import open_redis_state
    from rewards.domain.payouts import User

    # As the ingest edge opens it, but without the warehouse's dedup archive: Redis alone.
    state = await open_redis_state(params["url"])
    project, run = f"bench-engines-{params['index']}-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
    users = [(User(user, "evm_address"), "purchase") for user in USERS]

    async def batch(loop: int, n: int) -> int:
        ids = [f"{run}-{loop}-{n}-{i}" for i in range(BATCH)]
        first = (loop * 7919 + n * BATCH) % (len(users) - BATCH)
        async with state.ingest(project, ids, users[first : first + BATCH], None) as claim:
            pass  # (the edge publishes here)
        assert len(claim.fresh) == BATCH
        return BATCH

    try:
        await asyncio.gather(*(batch(loop, -1) for loop in range(params["connections"])))  # connections, scripts
        await go()
        events, seconds = await _for(params["seconds"], params["connections"], batch)
    finally:
        await state.close()
    return {"events": events, "seconds": seconds}


async def _kafka_plain(params: dict, go: Callable[[], Awaitable[None]]) -> dict:
    from rewards.adapters.production.kafka_log import _start_producer, _stop
    from schemas.topics import partition_key

    projects, payloads = _payloads(PAYLOADS)
    keys = [partition_key(project) for project in projects]
    producers = await asyncio.gather(
        *(_start_producer(params["bootstrap"], f"{TRANSACTIONAL_PREFIX}-plain-{i}") for i in range(PLAIN_PRODUCERS))
    )  # the producer kafka_log starts: its settings
    rates = {}
    try:
        await go()
        for per_transaction in PER_TRANSACTION:

            async def transaction(loop: int, n: int, per_transaction: int = per_transaction) -> int:
                producer, first = producers[loop], (loop + n * per_transaction) % len(payloads)
                await producer.begin_transaction()
                sent = [
                    await producer.send(params["topic"], payloads[i % len(payloads)], key=keys[i % len(payloads)])
                    for i in range(first, first + per_transaction)
                ]
                await asyncio.gather(*sent)
                await producer.commit_transaction()
                return per_transaction * BATCH

            await _for(WARM_UP_S, len(producers), transaction)  # warm-up at this batching
            events, seconds = await _for(params["seconds"], len(producers), transaction)
            rates[per_transaction] = events / seconds
    finally:
        await asyncio.gather(*(_stop(producer) for producer in producers))
    return {"events": 0, "seconds": 1, "rates": rates}


async def _kafka_log(params: dict, go: Callable[[], Awaitable[None]]) -> dict:
    from rewards.adapters.production import kafka_log
    from rewards.settings import Settings

    # A topic of its own (the ingest suite's workers read rewards.events): kafka_log sends to this name.
    kafka_log.EVENTS_TOPIC = params["topic"]
    projects, payloads = _payloads(PAYLOADS)
    event_log = await kafka_log.KafkaEventLog.start(
        params["bootstrap"], Settings().producer_pool_size, instance=TRANSACTIONAL_PREFIX
    )

    async def publish(loop: int, n: int) -> int:
        i = (loop * 13 + n) % len(payloads)
        await event_log.publish(projects[i], payloads[i])
        return BATCH

    try:
        await _for(WARM_UP_S, params["publishes"], publish)  # every producer's first transaction
        await go()
        events, seconds = await _for(params["seconds"], params["publishes"], publish)
    finally:
        await event_log.close()
    return {"events": events, "seconds": seconds}


async def _kafka_consume(params: dict, go: Callable[[], Awaitable[None]]) -> dict:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        params["topic"],
        bootstrap_servers=params["bootstrap"],
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        await consumer.getmany(timeout_ms=2000, max_records=1)  # assigned, fetching
        await go()
        started = time.perf_counter()
        stop, events, last = started + params["seconds"], 0, started
        while time.perf_counter() < stop:
            fetched = await consumer.getmany(timeout_ms=500)
            if not fetched:
                break  # all read: the time to the last message counts
            events += sum(len(messages) for messages in fetched.values()) * BATCH
            last = time.perf_counter()
    finally:
        await consumer.stop()
    return {"events": events, "seconds": last - started}


async def _clickhouse_inserts(params: dict, go: Callable[[], Awaitable[None]]) -> dict:
    from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse

    deliveries = params["deliveries"]
    # One client each: a clickhouse-connect client runs one query at a time (its session).
    warehouses = [await ClickHouseWarehouse.connect(params["url"]) for _ in range(params["clients"])]
    run = uuid.uuid4().hex[:8]

    async def delivery(loop: int, n: int) -> int:
        return await _insert(warehouses[loop], deliveries[(loop + n) % len(deliveries)], f"bench:{run}:{loop}-{n}")

    try:
        await asyncio.gather(*(delivery(loop, -1) for loop in range(len(warehouses))))  # warm-up
        await go()
        events, seconds = await _for(params["seconds"], len(warehouses), delivery)
    finally:
        for warehouse in warehouses:
            await warehouse.close()
    return {"events": events, "seconds": seconds}


async def _chdb_inserts(params: dict, go: Callable[[], Awaitable[None]]) -> dict:
    from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse

    deliveries = params["deliveries"]
    warehouse = ChdbWarehouse(Path(params["path"]))
    run = uuid.uuid4().hex[:8]

    async def delivery(loop: int, n: int) -> int:
        return await _insert(warehouse, deliveries[n % len(deliveries)], f"bench:{run}:{n}")

    try:
        await warehouse.migrate()
        await delivery(0, -1)  # warm-up
        await go()
        events, seconds = await _for(params["seconds"], 1, delivery)  # one engine per process, one thread
    finally:
        await warehouse.close()
    return {"events": events, "seconds": seconds}


async def _sqlite_claims(params: dict, go: Callable[[], Awaitable[None]]) -> dict:
    from bench.load import USERS, batch_ids
    from rewards.adapters.embedded.sqlite_db import SqliteDatabase
    from rewards.adapters.embedded.sqlite_outbox import SqliteOutbox
    from rewards.adapters.embedded.sqlite_state import SqliteStateStore
    from rewards.domain.payouts import User

    db = SqliteDatabase(Path(params["path"]))
    state, outbox = SqliteStateStore(db), SqliteOutbox(db)
    project = await state.create_project("bench-engines")
    _, payloads = _payloads(PAYLOADS, [project])
    run = uuid.uuid4().hex[:8]

    async def batch(loop: int, n: int) -> int:
        # As accept_events: the claim and the outbox write in one transaction; 97 new ids, 3 of the previous batch.
        ids = batch_ids(run, loop, n)
        users = [(User(USERS[(n * BATCH + i) % len(USERS)], "evm_address"), "purchase") for i in range(BATCH)]
        async with state.ingest(project, ids, users, None) as claim:
            await outbox.publish(project, payloads[n % len(payloads)])
            claim.respond(b"{}")
        return len(claim.fresh)

    try:
        await _for(WARM_UP_S, params["concurrency"], batch)  # warm-up
        await go()
        events, seconds = await _for(params["seconds"], params["concurrency"], batch)
    finally:
        await state.close()
    return {"events": events, "seconds": seconds}


WORKERS = {
    "redis_claims": _redis_claims,
    "kafka_plain": _kafka_plain,
    "kafka_log": _kafka_log,
    "kafka_consume": _kafka_consume,
    "clickhouse_inserts": _clickhouse_inserts,
    "chdb_inserts": _chdb_inserts,
    "sqlite_claims": _sqlite_claims,
}


def main(argv: list[str]) -> None:
    """A standalone run (`python -m bench.engines [--quick]`): its own engines, then this suite's table."""
    from bench.report import render
    from rewards.devengines import STARTERS

    with tempfile.TemporaryDirectory(prefix="bench-engines-") as base:
        engines = []
        try:
            started = time.monotonic()
            for name in ("kafka", "redis", "clickhouse"):
                engines.append(STARTERS[name](Path(base) / name))
            context = Context(Path(base) / "data", {e.env_name: e.url for e in engines}, "--quick" in argv)
            measured = time.monotonic()
            figures = run(context)
            print(f"engines started in {measured - started:.0f} s, suite {time.monotonic() - measured:.0f} s",
                  file=sys.stderr)  # fmt: skip
        finally:
            for engine in reversed(engines):
                engine.stop()
    print(render(figures + ceiling_figures(figures)))


if __name__ == "__main__":
    from bench.engines import main as _main  # this module by its name: the spawned processes import it so

    _main(sys.argv[1:])
