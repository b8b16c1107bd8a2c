"""Benchmark the affiliate listing on generated data (see bench/generate_affiliates.py).

    python -m bench.bench_affiliates --data-dir bench-data

Two parts, one table:
1. In-process, the listing's page query (the ordered keys of a page and the count, the heavy part)
   on the embedded engine, beside the same answer computed from the raw tables (what the
   materialized views save); the two answers are checked to be identical.
2. Over HTTP, GET /affiliates against a real `rewards serve` on the same data, beside GET /health
   on the same server (the floor of the HTTP stack).
"""

import asyncio
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import typer

from query_api.affiliates import queries
from query_api.affiliates.router import window
from rewards.embedded.chdb_warehouse import ChdbWarehouse
from tests.harness import Server

RAW_STATS = """(
    SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
           if(level = 1, base, 0) AS r1_volume, if(level = 2, base, 0) AS r2_volume,
           if(level = 3, base, 0) AS r3_volume, if(level = 4, base, 0) AS r4_volume,
           toDecimal256(0, 18) AS earnings, toUInt64(0) AS referred_users, toDate32(happened_at) AS day
    FROM affiliate_volumes
    UNION ALL
    SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)),
           0, 0, 0, 0, amount, 0, toDate32(happened_at)
    FROM payouts WHERE currency = 'point' AND role = 'affiliate'
    UNION ALL
    SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)),
           0, 0, 0, 0, 0, 1, toDate32(referred_at)
    FROM referrals
)"""

CASES = {
    "filter + sort (status, region; r1_volume)": {"statuses": "active", "regions": "EU", "sort_by": "r1_volume"},
    "default (total_volume desc, all time)": {},
    "search + sort by name": {"query": "affiliate 4242", "sort_by": "name", "sort_order": "asc"},
    "30d window + filter + earnings sort": {"dateRange": "30d", "statuses": "active", "sort_by": "total_earnings"},
}


def listing_of(params: dict) -> queries.Listing:
    filters = {k: tuple(params[k].split(",")) for k in ("statuses", "regions") if k in params}
    today = datetime.now(UTC).date()
    return queries.Listing(
        sort_by=params.get("sort_by", "total_volume"),
        descending=params.get("sort_order", "desc") == "desc",
        filters=filters,
        tiers=None,
        default_tier="base",
        search=params.get("query"),
        days=window(params.get("dateRange", "all"), None, None, today),
        offset=0,
        limit=25,
    )


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def timed_queries(warehouse: ChdbWarehouse, sql: str, params: dict, runs: int) -> tuple[list[float], list]:
    await warehouse.query(sql, params)  # warm-up
    samples, rows = [], []
    for _ in range(runs):
        start = time.perf_counter()
        rows = await warehouse.query(sql, params)
        samples.append((time.perf_counter() - start) * 1000)
    return samples, rows


async def in_process(data_dir: Path, project_id: str, runs: int) -> list[tuple]:
    warehouse = ChdbWarehouse(data_dir / "warehouse")
    table = []
    for name, params in CASES.items():
        sql, sql_params = queries.page_sql(listing_of(params), project_id)
        raw_sql = sql.replace("FROM affiliate_stats_daily WHERE", f"FROM {RAW_STATS} WHERE").replace(
            "FROM affiliate_stats WHERE", f"FROM {RAW_STATS} WHERE"
        )
        views, view_rows = await timed_queries(warehouse, sql, sql_params, runs)
        raw, raw_rows = await timed_queries(warehouse, raw_sql, sql_params, max(3, runs // 10))
        if view_rows != raw_rows:
            sys.exit(f"views and raw tables disagree for {name!r}")
        table.append((name, *percentiles(views), *percentiles(raw)))
    await warehouse.close()
    return table


def over_http(data_dir: Path, api_key: str, runs: int) -> list[tuple]:
    server = Server(data_dir).start()
    headers = {"Authorization": f"Bearer {api_key}"}
    table = []
    try:
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
            floor = _timed_gets(client, "/health", {}, runs)
            for name, params in CASES.items():
                samples = _timed_gets(client, "/api/v1/affiliates", params, runs)
                table.append((name, *percentiles(samples), *percentiles(floor)))
    finally:
        server.stop()
    return table


def _timed_gets(client: httpx.Client, path: str, params: dict, runs: int) -> list[float]:
    client.get(path, params=params).raise_for_status()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        client.get(path, params=params).raise_for_status()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def print_table(title: str, baseline: str, rows: list[tuple]) -> None:
    typer.echo(f"\n{title}")
    typer.echo(f"| case | p50 ms | p99 ms | {baseline} p50 ms | {baseline} p99 ms | p50 ratio |")
    typer.echo("|---|---:|---:|---:|---:|---:|")
    for name, p50, p99, base50, base99 in rows:
        typer.echo(f"| {name} | {p50:.1f} | {p99:.1f} | {base50:.1f} | {base99:.1f} | {base50 / p50:.1f}× |")


def main(data_dir: Path = typer.Option(Path("bench-data")), runs: int = typer.Option(50)) -> None:
    info = json.loads((data_dir / "bench.json").read_text())
    counts = asyncio.run(_counts(data_dir, info["project_id"]))
    typer.echo(f"data: {counts}")
    print_table(
        "Listing SQL in-process (materialized views vs the same answer from raw tables)",
        "raw tables",
        asyncio.run(in_process(data_dir, info["project_id"], runs)),
    )
    print_table("GET /affiliates over HTTP (rewards serve)", "GET /health", over_http(data_dir, info["api_key"], runs))


async def _counts(data_dir: Path, project_id: str) -> dict:
    warehouse = ChdbWarehouse(data_dir / "warehouse")
    counts = {}
    for table in ("affiliates", "affiliate_volumes", "payouts", "referrals"):
        rows = await warehouse.query(
            f"SELECT count() AS c FROM {table} WHERE project_id = {{project:String}}", {"project": project_id}
        )
        counts[table] = int(rows[0]["c"])
    await warehouse.close()
    return counts


if __name__ == "__main__":
    typer.run(main)
