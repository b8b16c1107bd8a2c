"""Latency of two reads at two scales, in both shapes (issue 5, part 3):

- GET /payouts/summary?currency=point of a project with 1M and 10M payouts (target p99 < 5 ms);
- GET /claim-checks/claim-history of one user among 100k and 1M claim check rows (target p99 < 20 ms).

For each dataset and shape:
1. the endpoint's own SQL (captured from its read model) run by this process — on chdb in-process (embedded)
   or through the ClickHouse HTTP client (production) — beside the same answer computed from the raw tables,
   measured in the same run, and checked to be identical:
   - summary: sum over `payouts` instead of the `point_totals_by_project` view;
   - claim history: the latest version of every check of the project by argMax over all its rows, then the
     user's, instead of FINAL restricted on the sorting key (project, user) — what the key restriction saves;
2. the endpoint over HTTP — `rewards serve` (embedded) or a `rewards query-api` process (production) —
   beside GET /health on the same server, the floor of the HTTP stack (ratio: how many floors it costs).
Then, per case and way of measuring, how p50 and p99 grow when the data grows tenfold.

    python -m bench.queries [--quick] [--data-root .bench-data]
"""

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from bench import exports
from bench.context import Context
from bench.generate_queries import Dataset, ensure
from bench.report import Figure, percentiles, time_awaits, time_calls
from query_api.claim_checks import service as claim_queries
from query_api.payouts import service as payout_queries
from rewards.domain.payouts import User
from tests.support.harness import Server, free_port, stop_processes, wait_healthy

SUMMARY_PATH, HISTORY_PATH = "/api/v1/payouts/summary", "/api/v1/claim-checks/claim-history"
TARGET_MS = {"payouts": 5.0, "claims": 20.0}
USERS_PROBED = 50  # claim history cycles over this many users, spread over the key range
# The contract's 100/minute would answer 429 within the first second of a benchmark.
RATE_ENV = {"REWARDS_RATE_LIMITS": json.dumps({"payouts_summary": "1000000/minute", "claim_history": "1000000/minute"})}
GROWTH_LIMIT = 1.5  # "flat": p50 at 10× the data within this factor


@dataclass(frozen=True)
class Probe:
    sql: str
    raw_sql: str
    params: dict
    http_params: dict


@dataclass(frozen=True)
class Runs:
    view: int  # samples of the endpoint's SQL and of each HTTP request
    raw: int  # samples of the raw-table baseline (slow: a full scan of the project)


class Recorder:
    """A Warehouse that only remembers the SQL a read model sends it: the bench times exactly that SQL."""

    def __init__(self):
        self.calls: list[tuple[str, dict]] = []

    async def query(self, sql: str, params: dict | None = None) -> list[dict]:
        self.calls.append((sql, params or {}))
        return []


def _swap(sql: str, old: str, new: str) -> str:
    if old not in sql:
        raise RuntimeError(f"the read model's SQL changed; update the raw baseline: {sql}")
    return sql.replace(old, new)


async def summary_probes(project_id: str) -> list[Probe]:
    recorder = Recorder()
    await payout_queries.project_total(recorder, project_id)
    sql, params = recorder.calls[0]
    raw = _swap(sql, "FROM point_totals_by_project WHERE", "FROM payouts WHERE currency = 'point' AND")
    return [Probe(sql, raw, params, {"currency": "point"})]


CHECK_COLUMNS = [
    "user_identifier_type", "user_identifier", "currency_address", "currency_chain_id", "currency_name",
    "currency_decimals", "amount", "reason", "status", "hash", "source_id", "created_at", "claimed_at", "version",
]  # fmt: skip
# The latest version of every check of the project, without FINAL and without the user in the sorting key's
# restriction: the user is an aggregated value, so the user's filter cannot be pushed below the GROUP BY.
RAW_LATEST = (
    "SELECT id, "
    + ", ".join(f"latest.{n} AS {c}" for n, c in enumerate(CHECK_COLUMNS, 1))
    + " FROM (SELECT id, argMax(tuple("
    + ", ".join(CHECK_COLUMNS)
    + "), version) AS latest FROM claim_checks WHERE project_id = {project:String} GROUP BY id)"
)


async def history_probes(project_id: str, users: int) -> list[Probe]:
    probes = []
    for index in range(USERS_PROBED):
        user = User(f"0x{index * users // USERS_PROBED + 1:040x}", "evm_address")
        recorder = Recorder()
        await claim_queries.claim_history(recorder, project_id, user, 0, 25)
        sql, params = recorder.calls[0]
        raw = _swap(
            sql, "FROM claim_checks FINAL WHERE project_id = {project:String} AND", f"FROM ({RAW_LATEST}) WHERE"
        )
        http = {"user_identifier": user.identifier, "user_identifier_type": user.identifier_type}
        probes.append(Probe(sql, raw, params, http))
    return probes


async def probes_of(dataset: Dataset, project_id: str) -> list[Probe]:
    if dataset.kind == "payouts":
        return await summary_probes(project_id)
    return await history_probes(project_id, dataset.users)


async def _timed(call: Callable[[Probe], Awaitable], probes: list[Probe], runs: int) -> tuple[list[float], list]:
    """Samples (ms) of `runs` calls cycling over the probes, after one warm-up call of each; their answers."""
    answers = [await call(probe) for probe in probes]
    samples, _ = await time_awaits(lambda run: call(probes[run % len(probes)]), runs)
    return samples, answers


@dataclass(frozen=True)
class Measure:
    """p50/p99 of one dataset measured one way, and of its baseline."""

    dataset: Dataset
    way: str  # e.g. "SQL in-process (chdb)"
    shape: str
    p50: float
    p99: float
    baseline_name: str
    baseline: float
    http: bool


async def sql_measures(warehouse, meta: dict, datasets: list[Dataset], shape: str, way: str, runs: Runs) -> list:
    measures = []
    for dataset in datasets:
        probes = await probes_of(dataset, meta[dataset.name]["project_id"])
        view, view_answers = await _timed(lambda p: warehouse.query(p.sql, p.params), probes, runs.view)
        few = probes[: runs.raw]
        raw, raw_answers = await _timed(lambda p: warehouse.query(p.raw_sql, p.params), few, runs.raw)
        if raw_answers != view_answers[: len(few)] or not any(view_answers):
            raise RuntimeError(f"{dataset.name} ({shape}): the view and the raw tables disagree, or answer nothing")
        p50, p99 = percentiles(view)
        measures.append(Measure(dataset, way, shape, p50, p99, "raw tables p50", percentiles(raw)[0], False))
    return measures


def http_measures(url: str, meta: dict, datasets: list[Dataset], shape: str, way: str, runs: Runs) -> list:
    measures = []
    for dataset in datasets:
        known = meta[dataset.name]
        probes = asyncio.run(probes_of(dataset, known["project_id"]))
        path = SUMMARY_PATH if dataset.kind == "payouts" else HISTORY_PATH
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {known['api_key']}"}) as client:
            floor = _timed_gets(client, "/health", [{}], runs.view)
            samples = _timed_gets(client, path, [p.http_params for p in probes], runs.view)
        p50, p99 = percentiles(samples)
        measures.append(Measure(dataset, way, shape, p50, p99, "GET /health p50", percentiles(floor)[0], True))
    return measures


def _timed_gets(client: httpx.Client, path: str, params: list[dict], runs: int) -> list[float]:
    for each in params:
        client.get(path, params=each).raise_for_status()
    samples, _ = time_calls(lambda run: client.get(path, params=params[run % len(params)]).raise_for_status(), runs)
    return samples


def embedded(context: Context, datasets: list[Dataset], runs: Runs) -> tuple[list[Measure], list[Figure]]:
    from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
    from runtime.wiring import open_embedded_state

    data_dir = context.data_root / "queries" / "embedded"

    async def in_process() -> tuple[dict, list[Measure]]:
        state, warehouse = open_embedded_state(data_dir), ChdbWarehouse(data_dir / "warehouse")
        try:
            meta = await ensure(state, warehouse, datasets, data_dir / "datasets.json")
            return meta, await sql_measures(warehouse, meta, datasets, "embedded", "SQL in-process (chdb)", runs)
        finally:
            await warehouse.close()
            await state.close()

    meta, measures = asyncio.run(in_process())
    server = Server(data_dir, env=RATE_ENV).start()
    try:
        measures += http_measures(server.url, meta, datasets, "embedded", "HTTP, rewards serve", runs)
        return measures, _export(server.url, server.process.pid, meta, datasets, "embedded", "rewards serve")
    finally:
        server.stop()


def production(context: Context, datasets: list[Dataset], runs: Runs) -> tuple[list[Measure], list[Figure]]:
    from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse
    from rewards.adapters.production.redis_state import open_redis_state

    env = context.engine_env

    async def over_client() -> tuple[dict, list[Measure]]:
        state = await open_redis_state(env["REDIS_URL"])
        warehouse = await ClickHouseWarehouse.connect(env["CLICKHOUSE_URL"])
        try:
            meta = await ensure(state, warehouse, datasets, context.data_root / "queries" / "production.json")
            way = "SQL over the ClickHouse HTTP client"
            return meta, await sql_measures(warehouse, meta, datasets, "production", way, runs)
        finally:
            await warehouse.close()
            await state.close()

    meta, measures = asyncio.run(over_client())
    with query_api({**env, **RATE_ENV}) as url:
        measures += http_measures(url, meta, datasets, "production", "HTTP, rewards query-api", runs)
        return measures, _export(url, _listening_pid(url), meta, datasets, "production", "rewards query-api")


def _export(url: str, pid: int, meta: dict, datasets: list[Dataset], shape: str, way: str) -> list[Figure]:
    """The smaller payouts dataset exported whole by the server (bench/exports.py)."""
    dataset = min((d for d in datasets if d.kind == "payouts"), key=lambda d: d.rows)
    return exports.measure(url, pid, meta[dataset.name]["api_key"], dataset.rows, shape, way)


def _listening_pid(url: str) -> int:
    """The process serving `url`'s port (a query-api of several processes: the one accepting connections)."""
    port = int(url.rsplit(":", 1)[1])
    for connection in psutil.net_connections("tcp"):
        if connection.laddr.port == port and connection.status == psutil.CONN_LISTEN and connection.pid:
            return connection.pid
    raise RuntimeError(f"no process listens on {port}")


@contextmanager
def query_api(env: dict[str, str]) -> Iterator[str]:
    """A `rewards query-api` process on the engines of `env` (and its other settings); yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "rewards", "query-api", "--port", str(port)],
        env={**os.environ, "REWARDS_LOG_LEVEL": "warning", **env},
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, [process])
        yield url
    finally:
        stop_processes([process])


def _scale(dataset: Dataset) -> str:
    count = f"{dataset.rows // 1_000_000}M" if dataset.rows >= 1_000_000 else f"{dataset.rows // 1000}k"
    return f"{count} payouts" if dataset.kind == "payouts" else f"{count} claim rows"


def _title(dataset: Dataset) -> str:
    return "payouts summary" if dataset.kind == "payouts" else "claim history of one user"


def figure(m: Measure) -> Figure:
    target = TARGET_MS[m.dataset.kind]
    ratio, note = (m.p50 / m.baseline, "× GET /health") if m.http else (m.baseline / m.p50, "× faster")
    return Figure(
        section="queries",
        case=f"{_title(m.dataset)}, {_scale(m.dataset)}: {m.way}",
        shape=m.shape,
        result=m.p50,
        unit="ms",
        p99=m.p99,
        baseline_name=m.baseline_name,
        baseline=m.baseline,
        ratio=ratio,
        ratio_note=note,
        target=f"p99 < {target:g} ms",
        met=m.p99 < target,
    )


def growth(small: Measure, large: Measure) -> Figure:
    p50 = large.p50 / small.p50
    return Figure(
        section="queries",
        case=f"{_title(large.dataset)}, {_scale(small.dataset)} → {_scale(large.dataset)}: {large.way}",
        shape=large.shape,
        result=p50,
        unit="× (growth)",
        p99=large.p99 / small.p99,
        target=f"flat (p50 < {GROWTH_LIMIT}×)",
        met=p50 < GROWTH_LIMIT,
    )


def figures_of(measures: list[Measure]) -> list[Figure]:
    figures = []
    for kind in ("payouts", "claims"):
        ways = dict.fromkeys((m.shape, m.way) for m in measures if m.dataset.kind == kind)
        for shape, way in ways:
            pair = sorted((m for m in measures if (m.dataset.kind, m.shape, m.way) == (kind, shape, way)),
                          key=lambda m: m.dataset.rows)  # fmt: skip
            figures += [figure(m) for m in pair] + [growth(pair[0], pair[-1])]
    return figures


def datasets(context: Context) -> list[Dataset]:
    payouts, claims = context.size(
        ((1_000_000, 10_000_000), (100_000, 1_000_000)),
        ((100_000, 1_000_000), (10_000, 100_000)),
        ((2_000, 20_000), (2_000, 20_000)),
    )
    return [Dataset("payouts", n) for n in payouts] + [Dataset("claims", n) for n in claims]


def run(context: Context, exports_only: bool = False) -> list[Figure]:
    """Every figure; `exports_only`: the export's alone (of the smaller payouts dataset only: `python -m bench.queries
    --exports-only` measures it without generating the 10M payouts)."""
    runs = context.size(Runs(view=1000, raw=10), Runs(view=100, raw=3), Runs(view=3, raw=1))
    sets = datasets(context)
    if exports_only:
        sets, runs = [min((d for d in sets if d.kind == "payouts"), key=lambda d: d.rows)], Runs(view=1, raw=1)
    figures = []
    for shape in (embedded, production):
        measures, exported = shape(context, sets, runs)
        figures += exported if exports_only else figures_of(measures) + exported
    return figures


def main(argv: list[str]) -> None:
    """Runs alone, on engines of its own (their data in a temporary directory: production data is regenerated)."""
    import tempfile

    from bench.report import render
    from rewards.devengines import STARTERS

    quick = "--quick" in argv
    data_root = Path(argv[argv.index("--data-root") + 1]) if "--data-root" in argv else Path(".bench-data")
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as base:
        engines = [STARTERS[name](Path(base) / name) for name in ("redis", "clickhouse")]
        try:
            env = {engine.env_name: engine.url for engine in engines}
            # query-api checks that every engine of the production shape is configured; it never connects to Kafka.
            env.setdefault("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9")
            print(render(run(Context(data_root.resolve(), env, quick), exports_only="--exports-only" in argv)))
        finally:
            for engine in reversed(engines):
                engine.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
