"""The workers' batch plans in a SQLite file (the PlanStore port; what a plan is: stream_workers.plans)."""

import asyncio
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rewards.ports import PlanStore

RETENTION_S = 7 * 24 * 3600  # plans are needed until the offsets past them are committed (seconds)


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
