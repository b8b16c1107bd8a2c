"""The event log on SQLite: a transactional outbox, the embedded stand-in for Kafka.

`publish` inside `StateStore.ingest`/`use_code` joins their transaction, so a batch is durable on
disk, with its dedup claim, before the response leaves. A failed insert (a full disk, an I/O error)
raises LogUnavailable, as every EventLog does: the transaction then rolls back with the claim. The
in-process worker is woken at once; other processes' writes are found by polling.

The webhook dispatcher reads the log too, once the worker has written it (SqliteWebhookFeed): the messages of a
project with webhook endpoints are copied to `webhook_feed` in the transaction that deletes them from the outbox.
"""

import asyncio
import contextlib
import sqlite3
from collections.abc import Sequence

from rewards.adapters.embedded.sqlite_db import SqliteDatabase
from rewards.domain.timestamps import now_ms
from rewards.ports import Delivery, LogUnavailable
from schemas.records import decode_message


class SqliteOutbox:
    def __init__(self, db: SqliteDatabase):
        self._db = db
        self._published = asyncio.Event()
        self.fed = asyncio.Event()  # set when messages went to the webhook feed

    shards = 1  # one log order: a project's conversions are never spread

    async def publish(self, project_id: str, payload: bytes) -> None:
        await self.publish_shards(project_id, {0: payload})

    async def publish_shards(self, project_id: str, payloads: dict[int, bytes]) -> None:
        rows = [(project_id, payload, now_ms()) for payload in payloads.values()]
        try:
            await self._db.run(
                lambda c: c.executemany("INSERT INTO outbox (project_id, payload, created_ms) VALUES (?, ?, ?)", rows)
            )
        except sqlite3.Error as exc:
            raise LogUnavailable(f"writing to the outbox failed: {exc}") from exc
        self._published.set()

    async def poll(self, max_deliveries: int, timeout_s: float) -> list[Delivery]:
        """One delivery of up to `max_deliveries` published messages (one warehouse write for all)."""
        return await _read_or_wait(self._db, self._published, lambda c: self._planned(c, max_deliveries), timeout_s)

    async def backlog(self) -> int:
        """Messages not yet written by the worker (rewards.web.backpressure). Delivered rows are deleted oldest first,
        in ranges, so the ids left are one run: two index lookups, however long the backlog."""

        def count(c: sqlite3.Connection) -> int:
            first, last = c.execute("SELECT min(id), max(id) FROM outbox").fetchone()
            return 0 if first is None else last - first + 1

        return await self._db.run(count)

    async def commit(self, deliveries: Sequence[Delivery]) -> None:
        ranges = [_range(d.token) for d in deliveries]

        def delete(c: sqlite3.Connection) -> int:
            fed = sum(c.execute(_FEED, first_last).rowcount for first_last in ranges)
            c.executemany("DELETE FROM outbox WHERE id BETWEEN ? AND ?", ranges)
            c.execute("DELETE FROM outbox_plan")
            return fed

        if await self._db.run(delete):
            self.fed.set()

    @staticmethod
    def _planned(c: sqlite3.Connection, limit: int) -> list[Delivery]:
        """The messages of the recorded plan, or of a new one: a delivery seen again after a crash holds
        the same messages under the same token, so the warehouse writes it once."""
        plan = c.execute("SELECT first_id, last_id FROM outbox_plan").fetchone()
        if plan is None:
            ids = c.execute("SELECT id FROM outbox ORDER BY id LIMIT ?", (limit,)).fetchall()
            if not ids:
                return []
            plan = (ids[0]["id"], ids[-1]["id"])
            c.execute("INSERT INTO outbox_plan (id, first_id, last_id) VALUES (1, ?, ?)", plan)
        rows = c.execute("SELECT payload FROM outbox WHERE id BETWEEN ? AND ? ORDER BY id", tuple(plan)).fetchall()
        records = [record for row in rows for record in decode_message(row["payload"])]
        # AUTOINCREMENT never reuses an id, so the token stays unique after rows are deleted.
        return [Delivery(f"outbox:{plan[0]}-{plan[1]}", records)]


_FEED = """INSERT OR IGNORE INTO webhook_feed (id, project_id, payload)
SELECT id, project_id, payload FROM outbox
WHERE id BETWEEN ? AND ? AND project_id IN (SELECT DISTINCT project_id FROM webhook_endpoints)"""


class SqliteWebhookFeed:
    """The webhook dispatcher's EventSource: the messages the worker has written, of projects with endpoints, in log
    order; a delivery is read again until committed."""

    def __init__(self, db: SqliteDatabase, fed: asyncio.Event | None = None):
        self._db = db
        self._fed = fed or asyncio.Event()

    async def poll(self, max_deliveries: int, timeout_s: float) -> list[Delivery]:
        return await _read_or_wait(self._db, self._fed, lambda c: self._first(c, max_deliveries), timeout_s)

    async def commit(self, deliveries: Sequence[Delivery]) -> None:
        ranges = [_range(d.token) for d in deliveries]
        await self._db.run(lambda c: c.executemany("DELETE FROM webhook_feed WHERE id BETWEEN ? AND ?", ranges))

    async def backlog(self) -> int:
        return await self._db.run(lambda c: c.execute("SELECT count(*) FROM webhook_feed").fetchone()[0])

    @staticmethod
    def _first(c: sqlite3.Connection, limit: int) -> list[Delivery]:
        rows = c.execute("SELECT id, payload FROM webhook_feed ORDER BY id LIMIT ?", (limit,)).fetchall()
        if not rows:
            return []
        records = [record for row in rows for record in decode_message(row["payload"])]
        return [Delivery(f"feed:{rows[0]['id']}-{rows[-1]['id']}", records)]


async def _read_or_wait(db: SqliteDatabase, woken: asyncio.Event, read, timeout_s: float) -> list[Delivery]:
    """`read`'s deliveries; none: read again once `woken` is set (a write in this process) or `timeout_s` passed
    (another process's). Cleared before reading, so a write after the read still wakes it."""
    woken.clear()
    deliveries = await db.run(read)
    if deliveries:
        return deliveries
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(woken.wait(), timeout_s)
    return await db.run(read)


def _range(token: str) -> tuple[int, int]:
    first, last = token.rsplit(":", 1)[1].split("-")
    return int(first), int(last)
