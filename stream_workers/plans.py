"""Batch plans: where each batch of a partition ends, recorded before the batch is written.

A worker writes a batch of a partition, starting at offset `first`, under the token
`{topic}:{partition}:{first}-{last}`. If it dies after writing and before its offsets are committed,
the partition is read again from `first`, by it or another worker, possibly in batches of other
sizes. Writing the same records under another token would write them twice, so the end of every
batch is recorded first, and a batch starting at an offset that already has a plan ends where the
plan says. The first plan recorded for an offset wins, so two workers holding the same partition
during a rebalance agree too.

Plans are needed only until the offsets past them are committed (seconds); they are kept for days.

The production workers keep them in the warehouse they protect (`WarehousePlans`), not in Redis: a crash that
loses Redis's last second would lose the plan of a delivery being written, and its rows already inserted would
be written again under another token.
"""

import asyncio
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rewards.domain.timestamps import now_ms
from rewards.ports import PlanStore
from schemas.clickhouse.values import ch_datetime

RETENTION_S = 7 * 24 * 3600


def plan_key(topic: str, partition: int, first_offset: int) -> str:
    return f"{topic}:{partition}:{first_offset}"


class SqlitePlans(PlanStore):
    """Plans in a SQLite file that every worker of one machine shares (the embedded state's companion)."""

    PRUNE_EVERY = 1000

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS plans (key TEXT PRIMARY KEY, last_offset INTEGER NOT NULL, "
            "created_s REAL NOT NULL)"
        )
        self._conn.execute("CREATE INDEX IF NOT EXISTS plans_by_age ON plans (created_s)")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plans")
        self._claims = 0

    async def claim(self, key: str, last_offset: int) -> tuple[int, bool]:
        self._claims += 1
        prune = self._claims % self.PRUNE_EVERY == 0
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._claim, key, last_offset, prune)

    def _claim(self, key: str, last_offset: int, prune: bool) -> tuple[int, bool]:
        now = time.time()
        inserted = self._conn.execute(
            "INSERT INTO plans (key, last_offset, created_s) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING",
            (key, last_offset, now),
        ).rowcount
        (recorded,) = self._conn.execute("SELECT last_offset FROM plans WHERE key = ?", (key,)).fetchone()
        if prune:
            self._conn.execute("DELETE FROM plans WHERE created_s < ?", (now - RETENTION_S,))
        return recorded, inserted == 1

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._conn.close)
        self._executor.shutdown()


class WarehousePlans(PlanStore):
    """Plans in the warehouse (`worker_plans`, schemas/clickhouse/004_dedup_ids.sql): the first claim of a key wins
    because the insert carries the key as its deduplication token (a second insert of it is dropped); past the
    table's deduplication window, the earliest row still wins. Beside the rows the plan protects, so a crash
    cannot keep those rows and lose their plan."""

    READ = "SELECT last_offset FROM worker_plans WHERE plan_key = {key:String} ORDER BY created_at LIMIT 1"

    def __init__(self, warehouse):
        self._warehouse = warehouse

    async def claim(self, key: str, last_offset: int) -> tuple[int, bool]:
        row = {"plan_key": key, "last_offset": last_offset, "created_at": ch_datetime(now_ms())}
        await self._warehouse.insert("worker_plans", [row], f"plan:{key}")
        recorded = int((await self._warehouse.query(self.READ, {"key": key}))[0]["last_offset"])
        return recorded, recorded == last_offset

    async def close(self) -> None:
        pass  # the warehouse is closed by its owner
