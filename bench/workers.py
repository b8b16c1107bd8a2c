"""The stream worker's own cost per event: `stream_workers.processor.process_delivery`, timed in-process on
realistic deliveries, against the embedded warehouse (chdb, SQLite state) and the production engines (the
ClickHouse server, Redis state), with its time split by step.

- **Deliveries:** messages of 100 conversions as `bench/load.py` posts them (a purchase with an amount, metadata,
  each at its own time in the last minute), as many as a full delivery of each shape holds: embedded 50 messages
  (the worker's `MAX_DELIVERIES`), mixing 4 projects (the outbox's order); production `REWARDS_WORKER_BATCH_SIZE`
  records (10,000 by default) of one project (the topic is keyed by project, and a delivery is cut from one
  partition), the next delivery the next project.
  5% of the users are referred through a 4-level chain whose first level is a gold-tier affiliate. The
  configuration has two tiers, an end-user reward and a campaign bonus, so a purchase pays 2 payouts, a referred
  user's 6 and 4 volume rows. Every delivery's ids are new, accepted first as the ingest edge does (the state
  store knows them as `accepted`).
- **Steps:** decoding (`schemas.records.decode_message` of each message), state reads (processed marks, the
  warehouse's `dedup_ids`, configs, referral chains, tiers: `processor.plan`), computing rows (payout
  arithmetic and row building, pure: `processor.compute`), caps and budgets (`processor.allot`: nothing without them),
  inserting (one insert per table: `processor.write`),
  state marks (`processor.mark`). Their sum is what `process_delivery` does after decoding.
- **Baseline, same run:** the bare cost of the same delivery without the worker's logic: parse its messages with
  `orjson.loads` and insert the same rows (computed beforehand) under a new token. Baseline and delivery alternate,
  so drift on a shared machine moves both.
- **CPU:** the process's CPU time (`time.process_time`) over the whole delivery: the worker's CPU per event in the
  production shape (the ClickHouse server and Redis are other processes), the worker's and chdb's together embedded.
  1 / that is what one core of worker processes can sustain.
"""

import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from bench.context import Context
from bench.load import BATCH, USERS
from bench.report import Figure
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import Affiliate
from rewards.settings import Settings
from schemas.records import decode_message
from stream_workers import processor
from stream_workers.runner import MAX_DELIVERIES, freeze_startup_objects
from stream_workers.writes import Writes

PROJECTS = 4
REFERRED_SHARE = 0.05
USERS_PER_PROJECT = 2_000
CONFIG = {
    "default_tier": "base",
    "tiers": [
        {"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0.05", "r3": "0.02", "r4": "0.01"}},
        {"id": "gold", "name": "Gold", "rank": 2, "rates": {"r1": "0.2", "r2": "0.1", "r3": "0.05", "r4": "0.02"}},
    ],
    "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
                     "end_user_reward": {"rate": "0.1"}}],
    "referral_reward": {"referrer": "50", "referred": "10"},
    "campaigns": [{"id": "bench", "event_names": ["purchase"], "starts_at": "2020-01-01T00:00:00Z",
                   "ends_at": "2299-01-01T00:00:00Z", "bonus": "1.5"}],
}  # fmt: skip
# API.md §8's caps and budgets on every payout (all in points), none of them reached: the allot step's full cost.
LIMITS = {
    "caps": [
        {"applies_to": "end_user", "currency": "point", "amount": "1" + "0" * 20, "window": "30d"},
        {"applies_to": "referrer", "currency": "point", "amount": "1" + "0" * 20, "window": "calendar_month"},
        {"applies_to": "wallet", "currency": "point", "amount": "1" + "0" * 20, "window": "all_time"},
    ],
    "budgets": [{"currency": "point", "amount": "1" + "0" * 29}],
}
STEPS = ("decode", "state reads", "compute rows", "allot", "insert", "state marks")
PLAIN, LIMITED, BLOCKLISTED = "plain", "with caps and budgets", "beside a large blocklist"
CASES = {
    "decode": "decoding (schemas.records.decode_message)",
    "state reads": "state reads (marks, dedup_ids, configs, chains, tiers)",
    "compute rows": "computing rows (payout arithmetic, row building; pure)",
    "allot": "caps and budgets (the allot step: atomic state-store calls per project)",
    "insert": "inserting (one insert per table)",
    "state marks": "state marks (processed)",
}


def run(context: Context) -> list[Figure]:
    return asyncio.run(_run(context))


async def _run(context: Context) -> list[Figure]:
    deliveries = context.size(12, 4, 1)
    figures = []
    blocked = context.size(1_000_000, 100_000, 1_000)
    for shape in ("embedded", "production"):
        # Messages a delivery: a full delivery of the shape (the smoke test's: a few, it proves the suite runs).
        count = context.size(messages_per_delivery(shape), messages_per_delivery(shape), 5)
        # The same run plain, with caps and budgets (issue 29: ≤ 15% more CPU), and beside a large blocklist.
        for variant in (PLAIN, LIMITED, BLOCKLISTED):
            async with _engines(shape, context) as (state, warehouse):
                projects = [await _project(state, p, False) for p in range(PROJECTS)]
                if variant == LIMITED:  # the same engines, the same moments: plain and limited deliveries in turn
                    limited = [await _project(state, PROJECTS + p, True, users_of=p) for p in range(PROJECTS)]
                    figures += await _measure_limits(shape, state, warehouse, projects, limited, deliveries, count)
                    continue
                if variant == BLOCKLISTED:
                    await _block_users(state, projects, blocked)
                figures += await _measure(shape, state, warehouse, projects, deliveries, variant, blocked, count)
    return figures


async def _block_users(state, projects: list["_Project"], total: int) -> None:
    """`total` users on the blocklists (an even share per project), none of them the deliveries' users: written
    straight to the store's tables or keys (a million calls of the port would take the bench's time)."""
    from rewards.adapters.production.redis_keys import ProjectKeys

    share, now = total // len(projects), now_ms()
    for number, project in enumerate(projects):
        users = [f"0x{(0xB10C << 144) + number * share + n:040x}" for n in range(share)]
        if hasattr(state, "database"):  # SQLite
            rows = [(project.id, "evm_address", user, now) for user in users]
            await state.database.run(lambda c, rows=rows: c.executemany(
                "INSERT INTO blocklist (project_id, user_type, user_id, reason, created_ms) VALUES (?, ?, ?, NULL, ?)",
                rows))  # fmt: skip
            continue
        keys = ProjectKeys(project.id)
        for start in range(0, len(users), 10_000):
            chunk = [f"evm_address:{user}" for user in users[start : start + 10_000]]
            await state._redis.hset(keys.blocklist(), mapping=dict.fromkeys(chunk, "null"))
            await state._redis.zadd(keys.blocklist_by_time(), dict.fromkeys(chunk, now))


@asynccontextmanager
async def _engines(shape: str, context: Context):
    if shape == "embedded":
        from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
        from rewards.adapters.embedded.sqlite_db import SqliteDatabase
        from rewards.adapters.embedded.sqlite_state import SqliteStateStore

        with tempfile.TemporaryDirectory(dir=_mkdir(context.data_root / "workers")) as directory:
            state = SqliteStateStore(SqliteDatabase(Path(directory) / "state.sqlite3"))
            warehouse = ChdbWarehouse(Path(directory) / "warehouse")
            await warehouse.migrate()
            try:
                yield state, warehouse
            finally:
                await warehouse.close()
                await state.close()
        return
    import clickhouse_connect

    from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse
    from rewards.adapters.production.redis_state import open_redis_state

    url = context.engine_env["CLICKHOUSE_URL"]
    admin = await clickhouse_connect.get_async_client(dsn=url)
    await admin.command("DROP DATABASE IF EXISTS bench_workers SYNC")
    await admin.command("CREATE DATABASE bench_workers")
    warehouse = await ClickHouseWarehouse.connect(url.rstrip("/") + "/bench_workers")
    state = await open_redis_state(urlsplit(context.engine_env["REDIS_URL"])._replace(path="/14").geturl())  # own db
    try:
        await state._redis.flushdb()
        await warehouse.migrate()
        yield state, warehouse
    finally:
        await state._redis.flushdb()
        await state.close()
        await warehouse.close()
        await admin.command("DROP DATABASE IF EXISTS bench_workers SYNC")
        await admin.close()


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class _Project:
    id: str
    users: list[str]  # evm addresses; the first REFERRED_SHARE of them are referred


async def _project(state, number: int, limited: bool, users_of: int | None = None) -> _Project:
    """A project with the configuration (and caps and budgets when `limited`), a 4-level chain of affiliates (gold at
    level 1) and 5% referred users: project `users_of`'s users (its own by default)."""
    project_id = await state.create_project(f"bench-workers-{number}")
    await state.put_config(project_id, PayoutConfig.model_validate({**CONFIG, **(LIMITS if limited else {})}))
    first = number if users_of is None else users_of
    users = USERS[first * USERS_PER_PROJECT : (first + 1) * USERS_PER_PROJECT]
    chain = [User(f"0x{0xAFF000 + number * 16 + level:040x}", "evm_address") for level in range(4)]
    gold = Affiliate(f"evm_address:{chain[0].identifier}", chain[0], "L1", "active", "EU", None, "ok", "gold", now_ms())
    async with state.create_affiliate(project_id, gold):
        pass
    codes = []
    for owner in chain:
        async with state.create_codes(project_id, owner, 1, None) as change:
            codes.append(change.value[0].code)
    for referrer_code, referred in zip(codes[1:], chain, strict=False):  # chain[1] referred chain[0], …
        async with state.use_code(project_id, referrer_code, referred, {}):
            pass
    for user in users[: int(len(users) * REFERRED_SHARE)]:
        async with state.use_code(project_id, codes[0], User(user, "evm_address"), {}):
            pass
    return _Project(project_id, users)


def messages_per_delivery(shape: str) -> int:
    """Of BATCH events: a full delivery of the shape."""
    return MAX_DELIVERIES if shape == "embedded" else max(1, Settings().worker_batch_size // BATCH)


def _messages(
    projects: list[_Project], run: str, count: int
) -> tuple[list[bytes], list[tuple[str, list[str], list[str]]]]:
    """A delivery's messages (as the ingest edge publishes them: schemas.records.dump_conversions) and, per
    message, (project, dedup ids, users) to accept first."""
    messages, accepted = [], []  # of `projects` in turn
    received = now_ms()
    for m in range(count):
        project = projects[m % len(projects)]
        users = [project.users[(m * BATCH + i * 7) % len(project.users)] for i in range(BATCH)]
        ids = [f"{run}-{m}-{i}" for i in range(BATCH)]
        records = [
            {"type": "conversion", "project_id": project.id, "batch_id": f"{run}-{m}", "dedup_id": ids[i],
             "name": "purchase", "user_identifier": users[i], "user_identifier_type": "evm_address",
             "timestamp_ms": received - 1000 - (m * BATCH + i) * 7 % 60_000, "received_ms": received,
             "args": {"value": {"amount": f"{1 + (m + i) % 500}.{i:02d}", "currency": {"name": "USDC"}}},
             "metadata": {"source": "bench", "campaign": "autumn", "platform": "ios"}}
            for i in range(BATCH)
        ]  # fmt: skip
        messages.append(orjson.dumps(records))
        accepted.append((project.id, ids, users))
    return messages, accepted


async def _accept(state, accepted: list[tuple[str, list[str], list[str]]]) -> None:
    for project_id, ids, users in accepted:
        async with state.ingest(project_id, ids, [(User(u, "evm_address"), "purchase") for u in users], None):
            pass


class _Clock:
    """Wall and CPU time of each step, summed over the deliveries."""

    def __init__(self):
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    async def time(self, step: str, call: Callable[[], Awaitable | object]):
        wall, cpu = time.perf_counter(), time.process_time()
        result = call()
        if isinstance(result, Awaitable):
            result = await result
        self.wall.setdefault(step, []).append(time.perf_counter() - wall)
        self.cpu.setdefault(step, []).append(time.process_time() - cpu)
        return result


async def _delivery(state, warehouse, messages: list[bytes], token: str, clock: _Clock) -> Writes:
    """process_delivery's steps, each timed (the same calls in the same order)."""
    records = await clock.time("decode", lambda: [r for message in messages for r in decode_message(message)])
    records, projects = await clock.time("state reads", lambda: processor.plan(records, state, warehouse))
    writes = await clock.time("compute rows", lambda: processor.compute(records, projects, now_ms(), token))
    await clock.time("allot", lambda: processor.allot(writes, projects, state, warehouse, token))
    await clock.time("insert", lambda: processor.write(writes, token, warehouse))
    await clock.time("state marks", lambda: processor.mark(writes, state))
    return writes


async def _baseline(warehouse, messages: list[bytes], writes: Writes, token: str, clock: _Clock) -> None:
    """The same bytes parsed and the same rows inserted, without the worker's logic in between."""
    await clock.time("parse", lambda: [r for message in messages for r in orjson.loads(message)])
    await clock.time("insert", lambda: processor.write(writes, token, warehouse))


async def _measure(
    shape: str, state, warehouse, projects: list[_Project], deliveries: int, variant: str, blocked: int, count: int
) -> list[Figure]:
    events = count * BATCH
    run = uuid.uuid4().hex[:8]

    # Warm-up (caches, connections, the first parts of each table), and the rows the baseline inserts.
    def of(n: int) -> list[_Project]:
        return projects if shape == "embedded" else [projects[n % len(projects)]]

    warm, accepted = _messages(projects, f"{run}-warm", count)
    await _accept(state, accepted)
    rows = await _delivery(state, warehouse, warm, f"bench:{run}:warm", _Clock())
    freeze_startup_objects()  # as a worker process does once started
    assert rows.payouts > events and not rows.rows["dead_letters"], "the deliveries pay as the bench expects"
    measured, floor = _Clock(), _Clock()
    whole_wall, whole_cpu, floor_wall, floor_cpu = [], [], [], []
    for n in range(deliveries):
        messages, accepted = _messages(of(n), f"{run}-{n}", count)
        await _accept(state, accepted)
        wall, cpu = time.perf_counter(), time.process_time()
        await _baseline(warehouse, messages, rows, f"bench:{run}:floor-{n}", floor)
        floor_wall.append(time.perf_counter() - wall)
        floor_cpu.append(time.process_time() - cpu)
        wall, cpu = time.perf_counter(), time.process_time()
        await _delivery(state, warehouse, messages, f"bench:{run}:{n}", measured)
        whole_wall.append(time.perf_counter() - wall)
        whole_cpu.append(time.process_time() - cpu)

    def us(samples: list[float]) -> float:  # median per delivery, per event
        return statistics.median(samples) * 1e6 / events

    whole, base = us(whole_wall), us(floor_wall)
    mixed = f"{PROJECTS} projects each" if shape == "embedded" else "1 project each"
    case = f"{deliveries} deliveries of {events:,} records ({count} × {BATCH}-event messages, {mixed})"
    if variant == BLOCKLISTED:  # the state reads (the blocklist's among them) and the whole, beside the plain run's
        beside = f"{blocked:,} users blocked ({blocked // PROJECTS:,} per project)"
        return [
            Figure("workers", f"{CASES['state reads']}, wall, {beside}", shape, us(measured.wall["state reads"]),
                   "µs/event", baseline_name="CPU", baseline=us(measured.cpu["state reads"])),
            Figure("workers", f"whole delivery, worker process CPU, {beside}", shape, us(whole_cpu), "µs/event",
                   baseline_name="orjson.loads + insert of the same rows", baseline=us(floor_cpu),
                   ratio=us(whole_cpu) / us(floor_cpu), ratio_note="× baseline"),
        ]  # fmt: skip
    figures = [
        Figure("workers", f"{CASES[step]}, wall", shape, us(measured.wall[step]), "µs/event",
               baseline_name="CPU", baseline=us(measured.cpu[step]))
        for step in STEPS
    ]  # fmt: skip
    figures += [
        Figure("workers", f"whole delivery (decode + process_delivery), wall: {case}", shape, whole, "µs/event",
               baseline_name="orjson.loads + insert of the same rows", baseline=base, ratio=whole / base,
               ratio_note="× baseline"),
        Figure("workers", "whole delivery, worker process CPU", shape, us(whole_cpu), "µs/event",
               baseline_name="orjson.loads + insert of the same rows", baseline=us(floor_cpu),
               ratio=us(whole_cpu) / us(floor_cpu), ratio_note="× baseline"),
        Figure("workers", "events/s one core of workers sustains (1 / CPU per event)", shape, 1e6 / us(whole_cpu),
               "events/s"),
    ]  # fmt: skip
    return figures


async def _measure_limits(
    shape: str, state, warehouse, plain: list[_Project], limited: list[_Project], deliveries: int, count: int
) -> list[Figure]:
    """Issue 29's ≤ 15%: deliveries of projects with 3 caps and a budget against the same deliveries of projects
    without, in turn in the same engines (the embedded warehouse's cost drifts over a process's life: variants
    measured one after the other differed by a third in their baselines alone, and of a pair the second delivery's
    inserts cost more: each goes first in turn)."""
    events, run = count * BATCH, uuid.uuid4().hex[:8]

    def of(projects: list[_Project], n: int) -> list[_Project]:
        return projects if shape == "embedded" else [projects[n % len(projects)]]

    for projects in (plain, limited):
        warm, accepted = _messages(projects, f"{run}-warm-{projects[0].id}", count)
        await _accept(state, accepted)
        await _delivery(state, warehouse, warm, f"bench:{run}:warm:{projects[0].id}", _Clock())
    freeze_startup_objects()
    measured = _Clock()
    cpu: dict[str, list[float]] = {PLAIN: [], LIMITED: []}
    for n in range(deliveries):
        pair = ((PLAIN, plain), (LIMITED, limited))
        for variant, projects in pair if n % 2 == 0 else pair[::-1]:  # each first in turn: the second pays merges
            messages, accepted = _messages(of(projects, n), f"{run}-{variant[:4]}-{n}", count)
            await _accept(state, accepted)
            clock = measured if variant == LIMITED else _Clock()
            started = time.process_time()
            await _delivery(state, warehouse, messages, f"bench:{run}:{variant[:4]}:{n}", clock)
            cpu[variant].append(time.process_time() - started)

    def us(samples: list[float]) -> float:  # median per delivery, per event
        return statistics.median(samples) * 1e6 / events

    return [
        Figure("workers", f"{CASES['allot']}, wall, with 3 caps and a budget", shape, us(measured.wall["allot"]),
               "µs/event", baseline_name="CPU", baseline=us(measured.cpu["allot"])),
        Figure("workers", "whole delivery, worker process CPU, with 3 caps and a budget", shape, us(cpu[LIMITED]),
               "µs/event", baseline_name="the same deliveries without limits, in turn", baseline=us(cpu[PLAIN]),
               ratio=us(cpu[LIMITED]) / us(cpu[PLAIN]), ratio_note="× without limits", target="≤ 1.15 ×",
               met=us(cpu[LIMITED]) <= 1.15 * us(cpu[PLAIN])),
    ]  # fmt: skip
