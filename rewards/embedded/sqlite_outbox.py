"""The event log on SQLite: a transactional outbox, the embedded stand-in for Kafka.

`publish` inside `StateStore.ingest`/`use_code` joins their transaction, so a batch is durable on
disk, with its dedup claim, before the response leaves. The in-process worker is woken at once;
other processes' writes are found by polling.
"""

import asyncio
import contextlib
import sqlite3
from collections.abc import Sequence

from rewards.domain.timestamps import now_ms
from rewards.embedded.sqlite_db import SqliteDatabase
from rewards.ports import Delivery
from schemas.records import load_records


class SqliteOutbox:
    def __init__(self, db: SqliteDatabase):
        self._db = db
        self._published = asyncio.Event()

    async def publish(self, project_id: str, payload: bytes) -> None:
        await self._db.run(
            lambda c: c.execute(
                "INSERT INTO outbox (project_id, payload, created_ms) VALUES (?, ?, ?)", (project_id, payload, now_ms())
            )
        )
        self._published.set()

    async def poll(self, max_deliveries: int, timeout_s: float) -> list[Delivery]:
        self._published.clear()  # before reading, so a publish after the read still wakes us
        deliveries = await self._db.run(lambda c: self._pending(c, max_deliveries))
        if deliveries:
            return deliveries
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._published.wait(), timeout_s)
        return await self._db.run(lambda c: self._pending(c, max_deliveries))

    async def commit(self, deliveries: Sequence[Delivery]) -> None:
        ids = [(int(d.token.rsplit(":", 1)[1]),) for d in deliveries]
        await self._db.run(lambda c: c.executemany("DELETE FROM outbox WHERE id = ?", ids))

    @staticmethod
    def _pending(c: sqlite3.Connection, limit: int) -> list[Delivery]:
        rows = c.execute("SELECT id, payload FROM outbox ORDER BY id LIMIT ?", (limit,)).fetchall()
        # AUTOINCREMENT never reuses an id, so the token stays unique after rows are deleted.
        return [Delivery(f"outbox:{row['id']}", load_records(row["payload"])) for row in rows]
