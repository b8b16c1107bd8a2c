"""AllotmentStore on SQLite: rewards.domain.allotment's rule over its tables (sqlite_db.SCHEMA), one IMMEDIATE
transaction per call: no other writer, in this process or another, sees the counters between a grant and its count."""

import sqlite3
from collections.abc import Mapping, Sequence

from rewards.adapters.embedded.sqlite_state.base import SWEEP_LIMIT, SqliteStateBase
from rewards.domain import allotment
from rewards.domain.allotment import GRANTS_KEPT_MS, KEPT_MS, Ask, Grant, Limits
from rewards.domain.integrity import Rejection
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms


def _user(user: User) -> str:
    return f"{user.identifier_type}:{user.identifier}"


class _SqliteBook:
    """rewards.domain.allotment.Book on the connection of an open transaction."""

    def __init__(self, c: sqlite3.Connection, project_id: str, seeds: Mapping[str, int], now: int):
        self._c, self._project, self._seeds, self._now = c, project_id, seeds, now

    def _counter(self, key: str) -> int | None:
        row = self._c.execute(
            "SELECT units FROM allot_counters WHERE project_id = ? AND key = ?", (self._project, key)
        ).fetchone()
        return None if row is None else int(row[0])

    def _add(self, key: str, units: int, expires_ms: int | None) -> None:
        current = self._counter(key)
        self._c.execute(
            "INSERT INTO allot_counters (project_id, key, units, expires_ms) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (project_id, key) DO UPDATE SET units = excluded.units, expires_ms = excluded.expires_ms",
            (self._project, key, str((current or 0) + units), expires_ms),
        )

    def granted(self, payout_id: str) -> Grant | None:
        row = self._c.execute(
            "SELECT units, rule FROM allot_grants WHERE project_id = ? AND payout_id = ?", (self._project, payout_id)
        ).fetchone()
        return None if row is None else Grant(int(row[0]), Rejection(row[1]) if row[1] else None)

    def seed(self, limits: Limits) -> None:
        """The paid counters of budgets that have none, from the caller's seeds."""
        for currency, units in self._seeds.items():
            if currency in limits.budgets:
                self._c.execute(
                    "INSERT OR IGNORE INTO allot_counters (project_id, key, units, expires_ms) VALUES (?, ?, ?, NULL)",
                    (self._project, f"paid|{currency}", str(units)),
                )

    def paid(self, currency: str) -> int | None:
        return self._counter(f"paid|{currency}")

    def total(self, side: str, currency: str, user: User) -> int:
        return self._counter(f"total|{side}|{currency}|{_user(user)}") or 0

    def month(self, side: str, currency: str, user: User, month: str) -> int:
        return self._counter(f"month|{month}|{side}|{currency}|{_user(user)}") or 0

    def history(self, side: str, currency: str, user: User, after_ms: int, before_ms: int) -> list[tuple[int, int]]:
        rows = self._c.execute(
            "SELECT at_ms, units FROM allot_history WHERE project_id = ? AND key = ? AND at_ms > ? AND at_ms < ?",
            (self._project, f"{side}|{currency}|{_user(user)}", after_ms, before_ms),
        ).fetchall()
        return [(row[0], int(row[1])) for row in rows]

    def record(self, ask: Ask, grant: Grant, limits: Limits) -> None:
        self._c.execute(
            "INSERT INTO allot_grants (project_id, payout_id, units, rule, created_ms) VALUES (?, ?, ?, ?, ?)",
            (self._project, ask.payout_id, str(grant.units), grant.rejection or "", self._now),
        )
        if grant.units == 0:
            return
        if ask.currency in limits.budgets:
            self._add(f"paid|{ask.currency}", grant.units, None)
        if ask.currency not in limits.caps:
            return
        user = _user(ask.user)
        self._add(f"total|{ask.side}|{ask.currency}|{user}", grant.units, None)
        month = allotment.calendar_month(ask.at_ms)
        month_kept = allotment.month_end_ms(ask.at_ms) + KEPT_MS
        self._add(f"month|{month}|{ask.side}|{ask.currency}|{user}", grant.units, month_kept)
        if history_ms := limits.history_ms(ask.currency):
            self._c.execute(
                "INSERT OR IGNORE INTO allot_history (project_id, key, at_ms, payout_id, units, expires_ms)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    self._project,
                    f"{ask.side}|{ask.currency}|{user}",
                    ask.at_ms,
                    ask.payout_id,
                    str(grant.units),
                    ask.at_ms + history_ms,
                ),
            )


class SqliteAllotmentStore(SqliteStateBase):
    """The reference adapter of rewards.ports.AllotmentStore."""

    async def allot(
        self, project_id: str, limits: Limits, asks: Sequence[Ask], seeds: Mapping[str, int] | None = None
    ) -> list[Grant]:
        now = now_ms()

        def allot(c: sqlite3.Connection) -> list[Grant]:
            _sweep(c, now, SWEEP_LIMIT)
            book = _SqliteBook(c, project_id, seeds or {}, now)
            book.seed(limits)
            return allotment.allot(asks, limits, book, now)

        return await self._db.run(allot)

    async def forget_grants(self, project_id: str, payout_ids: Sequence[str]) -> None:
        if payout_ids:
            await self._db.run(
                lambda c: c.executemany(
                    "DELETE FROM allot_grants WHERE project_id = ? AND payout_id = ?",
                    [(project_id, payout_id) for payout_id in payout_ids],
                )
            )

    async def budgets_paid(self, project_id: str, currencies: Sequence[str]) -> dict[str, int]:
        def paid(c: sqlite3.Connection) -> dict[str, int]:
            found = {}
            for currency in currencies:
                row = c.execute(
                    "SELECT units FROM allot_counters WHERE project_id = ? AND key = ?",
                    (project_id, f"paid|{currency}"),
                ).fetchone()
                if row is not None:
                    found[currency] = int(row[0])
            return found

        return await self._db.run(paid)

    async def reset_budgets(self, project_id: str, currencies: Sequence[str]) -> None:
        await self._db.run(
            lambda c: c.executemany(
                "DELETE FROM allot_counters WHERE project_id = ? AND key = ?",
                [(project_id, f"paid|{currency}") for currency in currencies],
            )
        )


def _sweep(c: sqlite3.Connection, now: int, limit: int) -> None:
    """Counters and rolling grants past their keeping, and grants never forgotten (a crash after their rows' write)."""
    c.execute(
        "DELETE FROM allot_counters WHERE (project_id, key) IN (SELECT project_id, key FROM allot_counters"
        " WHERE expires_ms IS NOT NULL AND expires_ms <= ? ORDER BY expires_ms LIMIT ?)",
        (now, limit),
    )
    c.execute(
        "DELETE FROM allot_history WHERE (project_id, key, at_ms, payout_id) IN (SELECT project_id, key, at_ms,"
        " payout_id FROM allot_history WHERE expires_ms <= ? ORDER BY expires_ms LIMIT ?)",
        (now, limit),
    )
    c.execute(
        "DELETE FROM allot_grants WHERE (project_id, payout_id) IN (SELECT project_id, payout_id FROM allot_grants"
        " WHERE created_ms <= ? ORDER BY created_ms LIMIT ?)",
        (now - GRANTS_KEPT_MS, limit),
    )
