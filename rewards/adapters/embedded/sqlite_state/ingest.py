"""IngestStore on SQLite: the claim of a batch's dedup ids and Idempotency-Key, and what became of each event."""

import sqlite3
from contextlib import asynccontextmanager

from rewards.adapters.embedded.sqlite_db import SqliteDatabase
from rewards.adapters.embedded.sqlite_state.base import SWEEP_LIMIT, SqliteStateBase
from rewards.domain.errors import IdempotencyKeyReused
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import IngestClaim

# dedup.processed: 0 accepted, 1 processed, 2 failed (set aside by the workers as a dead letter)
_PROCESSED, _FAILED = 1, 2
_STATUSES = ("accepted", "processed", "failed")


class SqliteIngestStore(SqliteStateBase):
    """The reference adapter of rewards.ports.IngestStore (the one port with settings of its own).

    Dedup ids and users' event names are kept for `dedup_window_s`, Idempotency-Key records for
    `idempotency_ttl_s`: a row past its time reads as absent at once, and every ingest deletes up to
    SWEEP_LIMIT expired rows of each table (found by their time index, so an empty sweep is one probe)."""

    def __init__(self, db: SqliteDatabase, dedup_window_s: float = 35 * 86400, idempotency_ttl_s: float = 24 * 3600):
        super().__init__(db)
        self._window_ms = max(1, int(dedup_window_s * 1000))
        self._idempotency_ms = max(1, int(idempotency_ttl_s * 1000))

    @asynccontextmanager
    async def ingest(
        self,
        project_id: str,
        dedup_ids: list[str],
        users_and_names: list[tuple[User, str]],
        idempotency: tuple[str, str] | None,
    ):
        claim = IngestClaim()
        async with self._db.transaction():
            now = now_ms()
            if idempotency is not None:
                claim.replay = await self._db.run(
                    lambda c: self._idempotent_replay(c, project_id, *idempotency, now - self._idempotency_ms)
                )
                if claim.replay is not None:
                    yield claim
                    return
            claim.fresh = await self._db.run(
                lambda c: self._claim(c, project_id, dedup_ids, users_and_names, now, now - self._window_ms)
            )
            yield claim
            if idempotency is not None and claim.response is not None:
                key, body_hash = idempotency
                await self._db.run(
                    lambda c: c.execute(
                        "INSERT INTO idempotency (project_id, key, body_hash, response, created_ms) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (project_id, key) DO UPDATE SET "
                        "body_hash = excluded.body_hash, response = excluded.response, "
                        "created_ms = excluded.created_ms",
                        (project_id, key, body_hash, claim.response, now),
                    )
                )
            await self._db.run(lambda c: self._sweep(c, now, SWEEP_LIMIT))

    async def sweep_expired(self, limit: int = SWEEP_LIMIT) -> int:
        """Delete up to `limit` expired rows of each table (dedup, user_events, idempotency); returns how many."""
        return await self._db.run(lambda c: self._sweep(c, now_ms(), limit))

    def _sweep(self, c: sqlite3.Connection, now: int, limit: int) -> int:
        window_cutoff, idem_cutoff = now - self._window_ms, now - self._idempotency_ms
        deleted = c.execute(
            "DELETE FROM dedup WHERE (project_id, dedup_id) IN "
            "(SELECT project_id, dedup_id FROM dedup WHERE created_ms <= ? ORDER BY created_ms LIMIT ?)",
            (window_cutoff, limit),
        ).rowcount
        deleted += c.execute(
            "DELETE FROM user_events WHERE (project_id, user_type, user_id, name) IN "
            "(SELECT project_id, user_type, user_id, name FROM user_events WHERE seen_ms <= ? "
            "ORDER BY seen_ms LIMIT ?)",
            (window_cutoff, limit),
        ).rowcount
        deleted += c.execute(
            "DELETE FROM idempotency WHERE rowid IN "
            "(SELECT rowid FROM idempotency WHERE created_ms <= ? ORDER BY created_ms LIMIT ?)",
            (idem_cutoff, limit),
        ).rowcount
        return deleted

    @staticmethod
    def _idempotent_replay(
        c: sqlite3.Connection, project_id: str, key: str, body_hash: str, cutoff: int
    ) -> bytes | None:
        row = c.execute(
            "SELECT body_hash, response FROM idempotency WHERE project_id = ? AND key = ? AND created_ms > ?",
            (project_id, key, cutoff),
        ).fetchone()
        if row is None:
            return None
        if row["body_hash"] != body_hash:
            raise IdempotencyKeyReused("Idempotency-Key has already been used with a different body")
        return row["response"]

    @staticmethod
    def _claim(
        c: sqlite3.Connection, project_id: str, dedup_ids: list[str], users_and_names, now: int, cutoff: int
    ) -> list[int]:
        fresh = []
        for index, dedup_id in enumerate(dedup_ids):
            # New, or known from before the window (not yet swept): a new event either way.
            cursor = c.execute(
                "INSERT INTO dedup (project_id, dedup_id, processed, created_ms) VALUES (?, ?, 0, ?) "
                "ON CONFLICT (project_id, dedup_id) DO UPDATE SET processed = 0, created_ms = excluded.created_ms "
                "WHERE dedup.created_ms <= ?",
                (project_id, dedup_id, now, cutoff),
            )
            if cursor.rowcount == 1:
                fresh.append(index)
        c.executemany(
            "INSERT INTO user_events (project_id, user_type, user_id, name, seen_ms) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (project_id, user_type, user_id, name) DO UPDATE SET seen_ms = excluded.seen_ms",
            [(project_id, users_and_names[i][0].identifier_type, users_and_names[i][0].identifier,
              users_and_names[i][1], now) for i in fresh],
        )  # fmt: skip
        return fresh

    async def event_status(self, project_id: str, dedup_id: str) -> str | None:
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT processed FROM dedup WHERE project_id = ? AND dedup_id = ? AND created_ms > ?",
                (project_id, dedup_id, now_ms() - self._window_ms),
            ).fetchone()
        )
        if row is None:
            return None
        return _STATUSES[row["processed"]]

    async def has_event(self, project_id: str, user: User, name: str) -> bool:
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT 1 FROM user_events WHERE project_id = ? AND user_type = ? AND user_id = ? AND name = ? "
                "AND seen_ms > ?",
                (project_id, user.identifier_type, user.identifier, name, now_ms() - self._window_ms),
            ).fetchone()
        )
        return row is not None

    async def mark_processed(self, project_id: str, dedup_ids: list[str]) -> None:
        await self._mark(project_id, dedup_ids, _PROCESSED)

    async def mark_failed(self, project_id: str, dedup_ids: list[str]) -> None:
        await self._mark(project_id, dedup_ids, _FAILED)

    async def _mark(self, project_id: str, dedup_ids: list[str], status: int) -> None:
        await self._db.run(
            lambda c: c.executemany(
                "UPDATE dedup SET processed = ? WHERE project_id = ? AND dedup_id = ?",
                [(status, project_id, dedup_id) for dedup_id in dedup_ids],
            )
        )

    async def processed_among(self, project_id: str, dedup_ids: list[str]) -> set[str]:
        def read(c: sqlite3.Connection) -> set[str]:
            marks = ",".join("?" * len(dedup_ids))
            rows = c.execute(
                "SELECT dedup_id FROM dedup WHERE project_id = ? AND processed > 0 AND created_ms > ? "
                f"AND dedup_id IN ({marks})",
                (project_id, now_ms() - self._window_ms, *dedup_ids),
            ).fetchall()
            return {row["dedup_id"] for row in rows}

        return await self._db.run(read) if dedup_ids else set()
