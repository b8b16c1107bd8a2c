"""The dedup window's cost (bounded state): what one remembered dedup id costs in each engine, what the
per-batch check of the warehouse costs, and what a 35-day window needs at 10k and 100k events/s.

- Redis: INFO `used_memory` before and after N dedup keys as the store writes them (`rw:{p}:dedup:<id>` →
  `processed`, with a TTL), in a database of its own, flushed after.
- ClickHouse: `dedup_ids` (migrations 004 and 005 of schemas/clickhouse/, in a database of its own) filled with
  N ids over 8 projects; the check is `WarehouseDedupArchive.known_among` for a 100-id batch (97 new ids, 3
  known, like the ingest load; new ids spread over the key range as real ones), against `SELECT 1` over the
  same client (the round trip's floor). Bytes per id on disk and of primary index in RAM come from
  `system.parts`.
- SQLite (embedded): the state file's bytes per id (dedup row, its time index, and the user_events row).
- The window: naive = every id of 35 days as a Redis key; chosen = Redis for the hot window (10 min, plus the
  backlog not yet processed) + the warehouse for 35 days (disk, and its primary index in RAM).
"""

import asyncio
import tempfile
import uuid
from pathlib import Path

from bench.context import Context
from bench.report import Figure, percentiles, time_awaits
from rewards.settings import Settings

WINDOW_S = 35 * 86400
HOT_S = Settings().dedup_hot_window  # 10 min by default
RATES = (10_000, 100_000)
PROJECTS = 8
_GB = 1e9


def run(context: Context) -> list[Figure]:
    return asyncio.run(_run(context))


async def _run(context: Context) -> list[Figure]:
    size = context.size
    redis_bytes = await _redis_bytes_per_id(context.engine_env["REDIS_URL"], size(1_000_000, 100_000, 5_000))
    ch = await _clickhouse(context.engine_env["CLICKHOUSE_URL"], size(10_000_000, 1_000_000, 20_000), size(300, 50, 5))
    sqlite_bytes = await _sqlite_bytes_per_id(size(100_000, 20_000, 2_000))
    figures = [
        Figure("dedup", "Redis bytes per dedup id (key with a TTL, value `processed`)", "production", redis_bytes, "B"),
        Figure("dedup", f"ClickHouse dedup_ids on disk per id ({ch['rows']:,} ids)", "production", ch["disk"], "B"),
        Figure("dedup", "ClickHouse dedup_ids primary index in RAM per id", "production", ch["index"], "B"),
        Figure(
            "dedup",
            "SQLite bytes per dedup id (dedup row + time index + user_events row)",
            "embedded",
            sqlite_bytes,
            "B",
        ),
        Figure(
            "dedup",
            f"per-batch check: 100 ids (97 new) against {ch['rows']:,} ids",
            "production",
            ch["p50"],
            "ms",
            p99=ch["p99"],
            baseline_name="SELECT 1 p50",
            baseline=ch["floor"],
            ratio=ch["p50"] / ch["floor"],
            ratio_note="× SELECT 1",
        ),
    ]
    for rate in RATES:
        ids = rate * WINDOW_S
        naive = ids * redis_bytes / _GB
        hot = rate * HOT_S * redis_bytes / _GB
        disk, index = ids * ch["disk"] / _GB, ids * ch["index"] / _GB
        case = f"35-day window at {rate:,} events/s ({ids / 1e9:.1f} billion ids)"
        figures += [
            Figure(
                "dedup",
                f"{case}: Redis RAM, {HOT_S / 60:.0f} min hot window",
                "production",
                hot,
                "GB",
                baseline_name="naive: every id in Redis",
                baseline=naive,
                ratio=naive / hot,
                ratio_note="× less RAM",
            ),
            Figure(
                "dedup",
                f"{case}: ClickHouse disk + primary index RAM",
                "production",
                disk,
                "GB disk",
                baseline_name=f"index RAM {index:.2f} GB",
                baseline=None,
            ),
        ]
    return figures


async def _redis_bytes_per_id(url: str, n: int) -> float:
    import redis.asyncio as aredis

    client = aredis.Redis.from_url(url, db=15, decode_responses=True)
    try:
        await client.flushdb()
        before = int((await client.info("memory"))["used_memory"])
        project = str(uuid.uuid4())
        for start in range(0, n, 10_000):
            async with client.pipeline(transaction=False) as pipe:
                for i in range(start, min(n, start + 10_000)):
                    pipe.set(f"rw:{{{project}}}:dedup:order-{uuid.UUID(int=i).hex}", "processed", px=int(HOT_S * 1000))
                await pipe.execute()
        after = int((await client.info("memory"))["used_memory"])
        return (after - before) / n
    finally:
        await client.flushdb()
        await client.aclose()


async def _clickhouse(url: str, n: int, runs: int) -> dict:
    import clickhouse_connect

    from rewards.adapters.dedup_archive import WRITTEN_AMONG, WarehouseDedupArchive
    from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse
    from schemas.clickhouse import load_migrations

    admin = await clickhouse_connect.get_async_client(dsn=url)
    await admin.command("CREATE DATABASE IF NOT EXISTS bench_dedup")
    await admin.close()
    warehouse = ClickHouseWarehouse(await clickhouse_connect.get_async_client(dsn=url.rstrip("/") + "/bench_dedup"))
    try:
        await warehouse.command("DROP TABLE IF EXISTS dedup_ids")  # as the DDL stands today
        table = next(m for m in load_migrations() if m.name == "dedup_ids").up[0]
        await warehouse.command(table)  # the table alone: no backfill
        for statement in next(m for m in load_migrations() if m.name == "dedup_ids_granules").up:
            await warehouse.command(statement)  # its layout since migration 005 (the empty table made anew)
        await warehouse.command(
            "INSERT INTO dedup_ids (project_id, kind, dedup_id, accepted_at, failed)"
            f" SELECT toString(number % {PROJECTS}), 'event',"
            f" concat('order-', hex(sipHash128(number))),"
            f" now64(3) - toIntervalSecond(number % {WINDOW_S - 86400}), 0 FROM numbers({n})"
        )
        await warehouse.command("OPTIMIZE TABLE dedup_ids FINAL")
        known = await warehouse.query(
            "SELECT project_id, dedup_id FROM dedup_ids WHERE project_id = '3' LIMIT 3000"
        )  # ids of project 3
        archive = WarehouseDedupArchive(warehouse)

        def batch(run: int) -> list[str]:
            return [r["dedup_id"] for r in known[3 * run % 2997 : 3 * run % 2997 + 3]] + [
                "order-" + uuid.uuid4().hex.upper() for _ in range(97)
            ]

        await time_awaits(lambda run: archive.known_among("3", batch(run), WINDOW_S), 20)  # warm-up
        samples, answer = await time_awaits(lambda run: archive.known_among("3", batch(run), WINDOW_S), runs)
        assert len(answer) == 3, answer
        floor, _ = await time_awaits(lambda run: warehouse.query("SELECT 1 AS one"), runs)
        p50, p99 = percentiles(samples)
        parts = (
            await warehouse.query(
                "SELECT sum(rows) AS rows, sum(bytes_on_disk) AS disk, sum(primary_key_bytes_in_memory) AS pk_memory, "
                "sum(primary_key_size) AS pk_disk "
                "FROM system.parts WHERE database = 'bench_dedup' AND table = 'dedup_ids' AND active"
            )
        )[0]
        rows = int(parts["rows"])
        assert WRITTEN_AMONG  # the production query, as the ingest edge sends it
        index = max(int(parts["pk_memory"]), int(parts["pk_disk"]))
        return {
            "rows": rows, "disk": int(parts["disk"]) / rows, "index": index / rows, "p50": p50, "p99": p99,
            "floor": percentiles(floor)[0],
        }  # fmt: skip
    finally:
        await warehouse.close()


async def _sqlite_bytes_per_id(n: int) -> float:
    from rewards.adapters.embedded.sqlite_db import SqliteDatabase
    from rewards.adapters.embedded.sqlite_state import SqliteStateStore
    from rewards.domain.payouts import User

    with tempfile.TemporaryDirectory() as directory:
        db = SqliteDatabase(Path(directory) / "state.sqlite3")
        store = SqliteStateStore(db)
        project = await store.create_project("bench")

        def size(c) -> int:
            return c.execute("PRAGMA page_count").fetchone()[0] * c.execute("PRAGMA page_size").fetchone()[0]

        before = await db.run(size)
        for first in range(0, n, 100):
            ids = [f"order-{uuid.UUID(int=i).hex}" for i in range(first, first + 100)]
            users = [(User(f"user{i}@example.com", "email"), "purchase") for i in range(first, first + 100)]
            async with store.ingest(project, ids, users, None):
                pass
        after = await db.run(size)
        await store.close()
        return (after - before) / n
