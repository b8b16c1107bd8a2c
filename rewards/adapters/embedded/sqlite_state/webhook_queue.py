"""WebhookQueue on SQLite (API.md §10): a row per delivery (its document; its status and, while pending, when it is due
in columns of their own, which the lease changes alone), and a row per endpoint failing since some time. A lease is
one transaction, so two dispatchers never take the same delivery."""

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import replace

from rewards.adapters.embedded.sqlite_state.base import SqliteStateBase
from rewards.domain import webhook_events
from rewards.domain.webhook_events import PENDING_DELIVERY, SUCCEEDED, Delivery, lease_shares

_SWEEP_CHUNK = 1_000  # finished deliveries deleted per transaction of a sweep (others' writes wait less)
_COLUMNS = "project_id, id, endpoint_id, created_ms, status, next_attempt_ms, document"


class SqliteWebhookQueue(SqliteStateBase):
    """The reference adapter of rewards.ports.WebhookQueue."""

    async def enqueue(self, deliveries: Sequence[Delivery]) -> int:
        rows = [_row(_pending(delivery)) for delivery in deliveries]

        def insert(c: sqlite3.Connection) -> int:
            before = c.total_changes
            c.executemany(f"INSERT OR IGNORE INTO webhook_deliveries ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            new = c.total_changes - before
            _queued(c, {(delivery.project_id, delivery.endpoint_id) for delivery in deliveries})
            return new

        return await self._db.run(insert) if rows else 0

    async def lease(
        self, now_ms: int, limit: int, per_endpoint: int, busy: Mapping[str, int], lease_ms: int
    ) -> list[Delivery]:
        def take(c: sqlite3.Connection) -> list[Delivery]:
            due = {}  # endpoint → its due deliveries, up to its room; earliest due endpoint first
            for endpoint_id in _due_endpoints(c, now_ms):
                room = per_endpoint - busy.get(endpoint_id, 0)
                if room > 0:
                    due[endpoint_id] = _due_of(c, endpoint_id, now_ms, room)
                if len(due) == limit:
                    break
            shares = lease_shares({endpoint_id: len(rows) for endpoint_id, rows in due.items()}, limit)
            taken = [row for endpoint_id, rows in due.items() for row in rows[: shares[endpoint_id]]]
            until = now_ms + lease_ms
            c.executemany(
                "UPDATE webhook_deliveries SET next_attempt_ms = ? WHERE project_id = ? AND id = ?",
                [(until, row["project_id"], row["id"]) for row in taken],
            )
            return [replace(_delivery(row), next_attempt_ms=until) for row in taken]

        return await self._db.run(take) if limit > 0 else []

    async def settle(self, deliveries: Sequence[Delivery], now_ms: int) -> dict[str, int | None]:
        def settle(c: sqlite3.Connection) -> dict[str, int | None]:
            held = [delivery for delivery in deliveries if _held(c, delivery.project_id, delivery.id)]
            c.executemany(
                "UPDATE webhook_deliveries SET status = ?, next_attempt_ms = ?, document = ? "
                "WHERE project_id = ? AND id = ?",
                [(d.status, d.next_attempt_ms, _document(d), d.project_id, d.id) for d in held],
            )
            endpoints = dict.fromkeys((d.project_id, d.endpoint_id) for d in deliveries)
            for project_id, endpoint_id in endpoints:
                if any(d.endpoint_id == endpoint_id and d.status != PENDING_DELIVERY for d in held):
                    _trim(c, project_id, endpoint_id, webhook_events.RETAIN_PER_ENDPOINT)
            return {endpoint: _failing(c, project_id, endpoint, held, now_ms) for project_id, endpoint in endpoints}

        return await self._db.run(settle) if deliveries else {}

    async def list_deliveries(
        self, project_id: str, endpoint_id: str, offset: int, limit: int
    ) -> tuple[list[Delivery], int]:
        """The page and the count in one transaction, so they agree (both read webhook_deliveries_by_time)."""

        def page(c: sqlite3.Connection) -> tuple[list[sqlite3.Row], int]:
            where = "WHERE project_id = ? AND endpoint_id = ?"
            rows = c.execute(
                f"SELECT {_COLUMNS} FROM webhook_deliveries {where} ORDER BY created_ms DESC, id DESC LIMIT ? OFFSET ?",
                (project_id, endpoint_id, limit, offset),
            ).fetchall()
            total = c.execute(f"SELECT count(*) FROM webhook_deliveries {where}", (project_id, endpoint_id)).fetchone()
            return rows, total[0]

        rows, total = await self._db.run(page)
        return [_delivery(row) for row in rows], total

    async def get_delivery(self, project_id: str, endpoint_id: str, delivery_id: str) -> Delivery | None:
        row = await self._db.run(lambda c: _read(c, project_id, endpoint_id, delivery_id))
        return None if row is None else _delivery(row)

    async def redeliver(self, project_id: str, endpoint_id: str, delivery_id: str, now_ms: int) -> Delivery | None:
        def redeliver(c: sqlite3.Connection) -> Delivery | None:
            row = _read(c, project_id, endpoint_id, delivery_id)
            if row is None:
                return None
            again = webhook_events.redelivered(_delivery(row), now_ms)
            c.execute(
                "UPDATE webhook_deliveries SET status = ?, next_attempt_ms = ?, document = ? "
                "WHERE project_id = ? AND id = ?",
                (again.status, again.next_attempt_ms, _document(again), project_id, delivery_id),
            )
            _queued(c, {(project_id, endpoint_id)})
            return again

        return await self._db.run(redeliver)

    async def forget_endpoint(self, project_id: str, endpoint_id: str) -> None:
        def forget(c: sqlite3.Connection) -> None:
            where = "WHERE project_id = ? AND endpoint_id = ?"
            c.execute(f"DELETE FROM webhook_deliveries {where}", (project_id, endpoint_id))
            c.execute(f"DELETE FROM webhook_failing {where}", (project_id, endpoint_id))
            c.execute(f"DELETE FROM webhook_queued {where}", (project_id, endpoint_id))

        await self._db.run(forget)

    async def sweep_deliveries(self, now_ms: int) -> int:
        """In transactions of _SWEEP_CHUNK deletions (found by their index: an empty sweep is one probe)."""
        cutoff, swept = now_ms - webhook_events.RETAIN_MS, 0
        while True:
            deleted = await self._db.run(lambda c: _sweep(c, cutoff, _SWEEP_CHUNK))
            swept += deleted
            if deleted < _SWEEP_CHUNK:
                return swept

    async def pending_deliveries(self) -> int:
        row = await self._db.run(
            lambda c: c.execute("SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'").fetchone()
        )
        return row[0]


def _pending(delivery: Delivery) -> Delivery:
    """A delivery as enqueued: pending, due at its next_attempt_ms (at its creation when it has none)."""
    due = delivery.created_ms if delivery.next_attempt_ms is None else delivery.next_attempt_ms
    return replace(delivery, status=PENDING_DELIVERY, next_attempt_ms=due)


def _document(delivery: Delivery) -> str:
    return json.dumps(webhook_events.delivery_to_json(delivery), separators=(",", ":"))


def _row(d: Delivery) -> tuple:
    return (d.project_id, d.id, d.endpoint_id, d.created_ms, d.status, d.next_attempt_ms, _document(d))


def _delivery(row: sqlite3.Row) -> Delivery:
    """A row's delivery: its next attempt is the column's (a lease changes the column alone)."""
    delivery = webhook_events.delivery_from_json(json.loads(row["document"]))
    return replace(delivery, next_attempt_ms=row["next_attempt_ms"] if row["status"] == PENDING_DELIVERY else None)


def _read(c: sqlite3.Connection, project_id: str, endpoint_id: str, delivery_id: str) -> sqlite3.Row | None:
    return c.execute(
        f"SELECT {_COLUMNS} FROM webhook_deliveries WHERE project_id = ? AND id = ? AND endpoint_id = ?",
        (project_id, delivery_id, endpoint_id),
    ).fetchone()


def _held(c: sqlite3.Connection, project_id: str, delivery_id: str) -> bool:
    query = "SELECT 1 FROM webhook_deliveries WHERE project_id = ? AND id = ?"
    return c.execute(query, (project_id, delivery_id)).fetchone() is not None


def _queued(c: sqlite3.Connection, endpoints: set[tuple[str, str]]) -> None:
    c.executemany("INSERT OR IGNORE INTO webhook_queued (project_id, endpoint_id) VALUES (?, ?)", list(endpoints))


def _due_endpoints(c: sqlite3.Connection, now_ms: int) -> list[str]:
    """The endpoints with deliveries due by `now_ms`, earliest due first: each queued endpoint's earliest due, one
    index probe each (an aggregate over every pending delivery cost 3.6 ms a lease at 10,000 pending:
    bench/webhooks.py); an endpoint with none pending leaves the queued ones."""
    rows = c.execute(
        "SELECT project_id, endpoint_id, (SELECT min(next_attempt_ms) FROM webhook_deliveries d"
        " WHERE d.endpoint_id = q.endpoint_id AND d.status = 'pending') AS due"
        " FROM webhook_queued q"
    ).fetchall()
    gone = [(r["project_id"], r["endpoint_id"]) for r in rows if r["due"] is None]
    c.executemany("DELETE FROM webhook_queued WHERE project_id = ? AND endpoint_id = ?", gone)
    due = sorted((row["due"], row["endpoint_id"]) for row in rows if row["due"] is not None and row["due"] <= now_ms)
    return [endpoint_id for _, endpoint_id in due]


def _due_of(c: sqlite3.Connection, endpoint_id: str, now_ms: int, most: int) -> list[sqlite3.Row]:
    return c.execute(
        f"SELECT {_COLUMNS} FROM webhook_deliveries WHERE endpoint_id = ? AND status = 'pending' "
        "AND next_attempt_ms <= ? ORDER BY next_attempt_ms, id LIMIT ?",
        (endpoint_id, now_ms, most),
    ).fetchall()


def _sweep(c: sqlite3.Connection, cutoff: int, most: int) -> int:
    """Delete up to `most` finished deliveries created before `cutoff`."""
    return c.execute(
        "DELETE FROM webhook_deliveries WHERE rowid IN (SELECT rowid FROM webhook_deliveries "
        "WHERE status <> 'pending' AND created_ms < ? LIMIT ?)",
        (cutoff, most),
    ).rowcount


def _trim(c: sqlite3.Connection, project_id: str, endpoint_id: str, kept: int) -> None:
    """Let the endpoint's finished deliveries past the newest `kept` go."""
    c.execute(
        "DELETE FROM webhook_deliveries WHERE rowid IN (SELECT rowid FROM webhook_deliveries WHERE project_id = ? "
        "AND endpoint_id = ? AND status <> 'pending' ORDER BY created_ms DESC, id DESC LIMIT -1 OFFSET ?)",
        (project_id, endpoint_id, kept),
    )


def _failing(c: sqlite3.Connection, project_id: str, endpoint_id: str, held: list[Delivery], now_ms: int) -> int | None:
    """Since when every attempt of the endpoint failed, its attempts among `held` (in order) counted in: a success
    clears it, a failure starts it unless running. An endpoint none of whose deliveries is held keeps it."""
    row = c.execute("SELECT since_ms FROM webhook_failing WHERE endpoint_id = ?", (endpoint_id,)).fetchone()
    since = None if row is None else row[0]
    attempts = [d for d in held if d.endpoint_id == endpoint_id]
    for delivery in attempts:
        since = None if delivery.status == SUCCEEDED else since if since is not None else now_ms
    if attempts and since is None:
        c.execute("DELETE FROM webhook_failing WHERE endpoint_id = ?", (endpoint_id,))
    elif attempts:
        c.execute(
            "INSERT OR REPLACE INTO webhook_failing (endpoint_id, project_id, since_ms) VALUES (?, ?, ?)",
            (endpoint_id, project_id, since),
        )
    return since
