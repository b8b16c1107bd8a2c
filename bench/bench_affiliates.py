"""Benchmark GET /affiliates on generated data (see bench/generate_affiliates.py), at two scales.

    python -m bench.bench_affiliates --data-dir bench-data      # one data dir, as generated
    python -m bench                                             # the runner calls `run(context)`

Per case and shape: GET /affiliates over HTTP (p50, p99) against a real `rewards serve` (embedded) or a
`rewards query-api` process on Redis and a ClickHouse server (production), beside the same page computed
from the raw tables with no read model (what the read model saves), on chdb in-process or through the
ClickHouse HTTP client; the two answers (affiliates in order, their figures, the count) are checked to be
identical. The affiliate portal's heaviest calls are measured on the same data and servers (bench/bench_portal.py).
`main` measures the embedded shape of one data dir only.
"""

import asyncio
import json
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import typer

from bench import bench_portal
from bench.context import Context
from bench.generate_affiliates import generate, generate_in
from bench.queries import query_api
from bench.report import Figure, percentiles, render, time_awaits, time_calls
from query_api.affiliates import service as queries
from query_api.affiliates.router import window
from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from rewards.domain.affiliates import LEVELS
from rewards.domain.payouts import User
from rewards.ports import StateStore, Warehouse
from tests.support.harness import Server

TARGET_P99_MS = 50
SCALES = {"1k": (1_000, 10_000), "10k": (10_000, 100_000), "100k": (100_000, 1_000_000)}  # affiliates, conversions
DATA_VERSION = 3  # bump when the generated tables change: older data dirs are not reused

RAW_FIGURES = """(
    SELECT reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
           if(level = 1, base, 0) AS r1, if(level = 2, base, 0) AS r2, if(level = 3, base, 0) AS r3,
           if(level = 4, base, 0) AS r4, toDecimal256(0, 18) AS earnings, toUInt64(0) AS referred,
           toDate32(happened_at) AS day
    FROM affiliate_volumes WHERE project_id = {project:String}
    UNION ALL
    SELECT reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)),
           0, 0, 0, 0, amount, 0, toDate32(happened_at)
    FROM payouts WHERE project_id = {project:String} AND currency = 'point' AND role = 'affiliate'
    UNION ALL
    SELECT reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)),
           0, 0, 0, 0, 0, 1, toDate32(referred_at)
    FROM referrals WHERE project_id = {project:String}
)"""
RAW_SORT = {
    "total_volume": "s.r1_volume + s.r2_volume + s.r3_volume + s.r4_volume",
    **{f"r{n}_volume": f"s.r{n}_volume" for n in LEVELS},
    "total_earnings": "s.earnings",
    "referred_users": "s.referred_users",
    "created_at": "a.created_at",
    "name": "lower(a.name)",
}

CASES = {
    "filter + sort (status, region; r1_volume)": {"statuses": "active", "regions": "EU", "sort_by": "r1_volume"},
    "default (total_volume desc, all time)": {},
    "search + sort by name": {"query": "affiliate 4242", "sort_by": "name", "sort_order": "asc"},
    "30d window + filter + earnings sort": {"dateRange": "30d", "statuses": "active", "sort_by": "total_earnings"},
}


def listing_of(params: dict) -> queries.Listing:
    filters = {k: tuple(params[k].split(",")) for k in ("statuses", "regions") if k in params}
    return queries.Listing(
        sort_by=params.get("sort_by", "total_volume"),
        descending=params.get("sort_order", "desc") == "desc",
        filters=filters,
        tiers=None,
        default_tier="base",
        search=params.get("query"),
        days=window(params.get("dateRange", "all"), None, None, datetime.now(UTC).date()),
        offset=0,
        limit=25,
    )


def raw_sql(listing: queries.Listing, project_id: str) -> tuple[str, dict]:
    """The page from the raw tables: every affiliate's figures summed from its rows, joined, sorted."""
    params: dict = {"project": project_id}
    matching = f"affiliates FINAL WHERE {' AND '.join(queries.matching_conditions(listing, params))}"
    in_window = "1"
    if listing.days is not None:
        in_window = "day BETWEEN {day_from:Date32} AND {day_to:Date32}"
        params.update(day_from=listing.days[0].isoformat(), day_to=listing.days[1].isoformat())
    sums = ", ".join(f"sumIf(r{n}, {in_window}) AS r{n}_volume" for n in LEVELS)
    sql = (
        "SELECT a.user_identifier_type AS type, a.user_identifier AS identifier,"
        + "".join(f" toString(s.r{n}_volume) AS r{n}_volume," for n in LEVELS)
        + " toString(s.earnings) AS earnings, s.referred_users AS referred_users,"
        f" (SELECT count() FROM {matching}) AS total_count"
        f" FROM (SELECT user_key, {sums}, sumIf(earnings, {in_window}) AS earnings, sum(referred) AS referred_users"
        f" FROM {RAW_FIGURES} GROUP BY user_key) AS s"
        f" RIGHT JOIN (SELECT * FROM {matching}) AS a ON s.user_key = a.user_key"
        f" ORDER BY {RAW_SORT[listing.sort_by]} {'DESC' if listing.descending else 'ASC'} NULLS LAST,"
        f" a.created_at DESC, a.user_identifier_type, a.user_identifier LIMIT {listing.limit}"
    )
    return sql, params


def _answer_of_raw(rows: list[dict]) -> tuple:
    keys = [f"r{n}_volume" for n in LEVELS] + ["earnings"]
    page = [(r["type"], r["identifier"], *(Decimal(r[k]) for k in keys), int(r["referred_users"])) for r in rows]
    return page, int(rows[0]["total_count"]) if rows else 0


def _answer_of_http(body: dict) -> tuple:
    keys = [f"r{n}_volume" for n in LEVELS] + ["total_earnings"]
    results = body["results"]
    page = [
        (a["user_identifier_type"], a["user_identifier"], *(Decimal(a[k]) for k in keys), a["referred_users"])
        for a in results
    ]
    return page, body["total_count"]


async def raw_tables(warehouse: Warehouse, project_id: str, runs: int) -> dict[str, tuple[float, tuple]]:
    """Per case: p50 ms of the page from the raw tables, and its answer."""
    result = {}
    for name, params in CASES.items():
        sql, sql_params = raw_sql(listing_of(params), project_id)
        samples, rows = await time_awaits(
            lambda _, sql=sql, sql_params=sql_params: warehouse.query(sql, sql_params), runs
        )
        result[name] = (percentiles(samples)[0], _answer_of_raw(rows))
    return result


def over_http(url: str, api_key: str, runs: int) -> dict[str, tuple[list[float], tuple]]:
    """Per case: GET /affiliates latencies (ms) against the server at `url`, and its answer."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {api_key}"}, timeout=30) as client:
        return {name: _timed_gets(client, params, runs) for name, params in CASES.items()}


def _timed_gets(client: httpx.Client, params: dict, runs: int) -> tuple[list[float], tuple]:
    _get(client, params)  # warm-up
    samples, body = time_calls(lambda _: _get(client, params), runs)
    return samples, _answer_of_http(body)


def _get(client: httpx.Client, params: dict) -> dict:
    response = client.get("/api/v1/affiliates", params=params)
    response.raise_for_status()
    return response.json()


def figures_of(http: dict, raw: dict, label: str, shape: str, where: str) -> list[Figure]:
    """One figure per case; exits if HTTP and the raw tables disagree."""
    figures = []
    for name in CASES:
        (samples, answer), (raw_p50, raw_answer) = http[name], raw[name]
        if answer != raw_answer:
            sys.exit(f"GET /affiliates and the raw tables disagree for {name!r} on {where}")
        p50, p99 = percentiles(samples)
        figures.append(
            Figure(
                section="queries", case=f"GET /affiliates {name}, {label}", shape=shape, result=p50,
                unit="ms", p99=p99, baseline_name="raw tables p50", baseline=raw_p50, ratio=raw_p50 / p50,
                ratio_note="× faster", target=f"p99 < {TARGET_P99_MS} ms", met=p99 < TARGET_P99_MS,
            )
        )  # fmt: skip
    return figures


def _raw_runs(runs: int) -> int:
    return max(3, runs // 10)


def measure(data_dir: Path, label: str, runs: int) -> list[Figure]:
    """The embedded shape on one generated data dir: `rewards serve`, the raw tables on chdb in-process."""
    info = json.loads((data_dir / "bench.json").read_text())

    async def raw() -> tuple[dict, dict]:
        warehouse = ChdbWarehouse(data_dir / "warehouse")
        try:
            return (
                await raw_tables(warehouse, info["project_id"], _raw_runs(runs)),
                await bench_portal.raw_tables(warehouse, info["project_id"], _raw_runs(runs)),
            )
        finally:
            await warehouse.close()

    raw_answers, raw_portal = asyncio.run(raw())
    server = Server(data_dir).start()
    try:
        http = over_http(server.url, info["api_key"], runs)
        portal = bench_portal.over_http(server.url, info["api_key"], runs)
    finally:
        server.stop()
    where = str(data_dir)
    return figures_of(http, raw_answers, label, "embedded", where) + bench_portal.figures_of(
        portal, raw_portal, label, "embedded", where
    )


def ensure_data(data_root: Path, scale: str) -> Path:
    """The generated data dir of a scale, generated on first use."""
    affiliates, conversions = SCALES[scale]
    data_dir = data_root / f"affiliates-{scale}-v{DATA_VERSION}"
    if not (data_dir / "bench.json").exists():
        result = asyncio.run(generate(data_dir, affiliates, conversions))
        (data_dir / "bench.json").write_text(json.dumps(result))
    return data_dir


def measure_production(context: Context, scale: str, label: str, runs: int) -> list[Figure]:
    """The production shape: a `rewards query-api` process, the raw tables through the ClickHouse client."""
    meta, raw_answers, raw_portal = asyncio.run(_production_raw(context, scale, _raw_runs(runs)))
    with query_api(context.engine_env) as url:
        http = over_http(url, meta["api_key"], runs)
        portal = bench_portal.over_http(url, meta["api_key"], runs)
    where = f"the ClickHouse server ({scale})"
    return figures_of(http, raw_answers, label, "production", where) + bench_portal.figures_of(
        portal, raw_portal, label, "production", where
    )


async def _production_raw(context: Context, scale: str, runs: int) -> tuple[dict, dict, dict]:
    from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse
    from rewards.adapters.production.redis_state import open_redis_state

    state = await open_redis_state(context.engine_env["REDIS_URL"])
    warehouse = await ClickHouseWarehouse.connect(context.engine_env["CLICKHOUSE_URL"])
    try:
        meta = await ensure_production(state, warehouse, context.data_root, scale)
        portal = await bench_portal.raw_tables(warehouse, meta["project_id"], runs)
        return meta, await raw_tables(warehouse, meta["project_id"], runs), portal
    finally:
        await warehouse.close()
        await state.close()


async def ensure_production(state: StateStore, warehouse: Warehouse, data_root: Path, scale: str) -> dict:
    """{project_id, api_key} of the scale's production data: an earlier run's when both engines still hold it."""
    meta_path = data_root / f"affiliates-{scale}-v{DATA_VERSION}-production.json"
    known = json.loads(meta_path.read_text()) if meta_path.exists() else None
    if known is None or not await _present(state, warehouse, scale, known):
        known = await generate_in(state, warehouse, *SCALES[scale])
        meta_path.parent.mkdir(parents=True, exist_ok=True)
        meta_path.write_text(json.dumps(known))
    return known


async def _present(state: StateStore, warehouse: Warehouse, scale: str, known: dict) -> bool:
    principal = await state.resolve_key(known["api_key"])
    if principal is None or principal.project_id != known["project_id"]:
        return False
    last = User(f"0x{SCALES[scale][0]:040x}", "evm_address")
    if await state.get_affiliate(known["project_id"], last) is None:
        return False
    sql = "SELECT count() > 0 AS present FROM payouts WHERE project_id = {project:String}"
    rows = await warehouse.query(sql, {"project": known["project_id"]})
    return bool(int(rows[0]["present"]))


def run(context: Context) -> list[Figure]:
    """The listing at 10k and 100k affiliates (10k only when quick): growth shows beside the target."""
    scales = context.size(["10k", "100k"], ["10k"], ["1k"])
    runs = context.size(50, 10, 3)
    figures = []
    for scale in scales:
        affiliates, conversions = SCALES[scale]
        label = f"{affiliates:,} affiliates / {conversions:,} conversions"
        figures += measure(ensure_data(context.data_root, scale), label, runs)
        figures += measure_production(context, scale, label, runs)
    return figures


def main(data_dir: Path = typer.Option(Path("bench-data")), runs: int = typer.Option(50)) -> None:
    typer.echo(render(measure(data_dir, str(data_dir), runs)))


if __name__ == "__main__":
    typer.run(main)
