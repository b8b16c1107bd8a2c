"""AllotmentStore on SQLite: rewards.domain.allotment's rule over its tables (sqlite_db.SCHEMA), one IMMEDIATE
transaction per call: no other writer, in this process or another, sees the counters between a grant and its count."""

import hashlib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from functools import lru_cache

import orjson
import structlog

from rewards.adapters.embedded.sqlite_state.base import SWEEP_LIMIT, SqliteStateBase
from rewards.domain import allotment
from rewards.domain.allotment import GRANTS_KEPT_MS, KEPT_MS, RELEASES_KEPT_MS, Ask, Grant, Limits, Tally
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms

log = structlog.get_logger(__name__)

_CHUNK = 400  # counter keys looked up per statement


def _user(user: User) -> str:
    return f"{user.identifier_type}:{user.identifier}"


@lru_cache(maxsize=65_536)
def _who(side: str, currency: str, user: User) -> str:
    """A user's counters of one side and currency: the currency's length first, so no address can pass for another's
    (lua/allot.lua names Redis's alike). Cached: one call asks for a user's names several times each."""
    return f"{side}|{len(currency)}:{currency}|{_user(user)}"


class _SqliteBook:
    """rewards.domain.allotment.Book on the connection of an open transaction. What the asks may read is loaded first,
    a statement per few hundred keys (`load`): a delivery reads each user's counters once, not per payout."""

    def __init__(self, c: sqlite3.Connection, project_id: str, seeds: Mapping[str, int], now: int):
        self._c, self._project, self._seeds, self._now = c, project_id, seeds, now
        self._counters: dict[str, int | None] = {}
        self._history: dict[str, list[tuple[int, int]]] = {}

    def load(self, tallies: Sequence[Tally], limits: Limits) -> None:
        """The counters the tallies may read (grants by time are read per user, only where the counters cannot
        tell)."""
        keys = [f"paid|{currency}" for currency in limits.budgets]
        for tally in tallies:
            if tally.currency not in limits.caps:
                continue
            for side in (allotment.END_USER, allotment.REFERRER):  # its own side's, and what wallet caps read of both
                counts = limits.counts(tally.currency, side if side == tally.side else "wallet")
                name = _who(side, tally.currency, tally.user)
                if "t" in counts:
                    keys.append(f"total|{name}")
                if "m" in counts:
                    keys += [f"month|{month}|{name}" for month in tally.months()]
        wanted = list(dict.fromkeys(keys))
        self._counters.update(dict.fromkeys(wanted))
        for chunk in _chunks(wanted):
            rows = self._c.execute(
                f"SELECT key, units FROM allot_counters WHERE project_id = ? AND key IN ({_marks(chunk)})",
                (self._project, *chunk),
            ).fetchall()
            self._counters.update({row[0]: int(row[1]) for row in rows})

    def _counter(self, key: str) -> int | None:
        if key not in self._counters:
            row = self._c.execute(
                "SELECT units FROM allot_counters WHERE project_id = ? AND key = ?", (self._project, key)
            ).fetchone()
            self._counters[key] = None if row is None else int(row[0])
        return self._counters[key]

    def _add(self, added: list[tuple[str, int, int | None]]) -> None:
        """Units added to counters ((key, units, expires ms)), each key once, in one statement."""
        for key, units, _ in added:
            self._counters[key] = (self._counter(key) or 0) + units
        self._c.executemany(
            "INSERT INTO allot_counters (project_id, key, units, expires_ms) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (project_id, key) DO UPDATE SET units = excluded.units",  # (a key's expiry never changes)
            [(self._project, key, str(self._counters[key]), expires_ms) for key, _, expires_ms in added],
        )

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
        return self._counter(f"total|{_who(side, currency, user)}") or 0

    def month(self, side: str, currency: str, user: User, month: str) -> int:
        return self._counter(f"month|{month}|{_who(side, currency, user)}") or 0

    def history(self, side: str, currency: str, user: User, after_ms: int, before_ms: int) -> list[tuple[int, int]]:
        key = _who(side, currency, user)
        if key not in self._history:
            rows = self._c.execute(
                "SELECT grants FROM allot_history WHERE project_id = ? AND key = ?", (self._project, key)
            ).fetchall()
            self._history[key] = [(at, int(units)) for row in rows for at, units in json.loads(row[0])]
        return [(at, units) for at, units in self._history[key] if after_ms < at < before_ms]

    def count(self, granted: Sequence[Tally], limits: Limits) -> None:
        added: dict[str, list] = {}  # key → [units, expires ms]: each counter summed first, then written once
        history = []  # one row per tally: [[event ms, units (text)], …]

        def add(key: str, units: int, expires_ms: int | None) -> None:
            if (found := added.get(key)) is None:
                added[key] = [units, expires_ms]
            else:
                found[0] += units

        for tally in granted:
            currency = tally.currency
            if currency in limits.budgets:
                add(f"paid|{currency}", tally.units, None)
            if not (counts := limits.counts(currency, tally.side)):
                continue
            name = _who(tally.side, currency, tally.user)
            if "t" in counts:
                add(f"total|{name}", tally.units, None)
            if "m" in counts:
                for month, units in tally.months().items():
                    add(f"month|{month}|{name}", units, allotment.month_end_of(month) + KEPT_MS)
            if "h" in counts:
                kept = limits.history_ms(currency)
                grants = orjson.dumps([[at, str(units)] for at, units in tally.times.items()]).decode()
                history.append((self._project, name, grants, max(tally.times) + kept))
                if name in self._history:  # (one not read yet is read from the table, this row included)
                    self._history[name] += tally.times.items()
        self._add([(key, units, expires_ms) for key, (units, expires_ms) in added.items()])
        self._c.executemany(
            "INSERT INTO allot_history (project_id, key, grants, expires_ms) VALUES (?, ?, ?, ?)", history
        )


class SqliteAllotmentStore(SqliteStateBase):
    """The reference adapter of rewards.ports.AllotmentStore."""

    async def allot_tallies(
        self,
        project_id: str,
        delivery: str,
        limits: Limits,
        tallies: Sequence[Tally],
        seeds: Mapping[str, int] | None = None,
    ) -> list[str]:
        now, asked = now_ms(), _tallies_fingerprint(tallies)

        def allot(c: sqlite3.Connection) -> list[str]:
            if (kept := _kept(c, project_id, delivery, asked, now)) is not None:
                return list(kept)
            book = _SqliteBook(c, project_id, seeds or {}, now)
            book.seed(limits)
            book.load(tallies, limits)
            verdicts = allotment.allot_tallies(tallies, limits, book, now)
            _keep(c, project_id, delivery, asked, "".join(verdicts), now)
            return verdicts

        return await self._db.run(allot)

    async def allot(
        self,
        project_id: str,
        delivery: str,
        limits: Limits,
        asks: Sequence[Ask],
        seeds: Mapping[str, int] | None = None,
    ) -> list[Grant]:
        now, asked = now_ms(), allotment.fingerprint(asks)

        def allot(c: sqlite3.Connection) -> list[Grant]:
            if (kept := _kept(c, project_id, delivery, asked, now)) is not None:
                return allotment.grants_of(asks, json.loads(kept))
            book = _SqliteBook(c, project_id, seeds or {}, now)
            book.seed(limits)
            book.load(allotment.tallied(asks)[0], limits)
            grants = allotment.allot_each(asks, limits, book, now)
            _keep(c, project_id, delivery, asked, json.dumps(allotment.cuts_of(asks, grants)), now)
            return grants

        return await self._db.run(allot)

    async def forget_grants(self, project_id: str, deliveries: Sequence[str]) -> None:
        if deliveries:
            await self._db.run(
                lambda c: c.executemany(
                    "DELETE FROM allot_deliveries WHERE project_id = ? AND delivery = ?",
                    [(project_id, delivery) for delivery in deliveries],
                )
            )

    async def release(self, project_id: str, check_id: str, currency: str, units: int) -> bool:
        now = now_ms()

        def release(c: sqlite3.Connection) -> bool:
            if not _first_time(c, project_id, check_id, now):
                return False
            _lower(c, project_id, f"paid|{currency}", units)
            return True

        return await self._db.run(release)

    async def give_back(self, project_id: str, token: str, limits: Limits, tallies: Sequence[Tally]) -> bool:
        now = now_ms()

        def give(c: sqlite3.Connection) -> bool:
            if not _first_time(c, project_id, token, now):
                return False
            for back in allotment.given_back(tallies, limits):
                key = f"paid|{back.currency}" if back.user is None else (
                    f"{back.counter.replace(':', '|')}|{_who(back.side, back.currency, back.user)}")  # fmt: skip
                _lower(c, project_id, key, back.units)
            return True

        return await self._db.run(give)

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


def _kept(c: sqlite3.Connection, project_id: str, delivery: str, asked: str, now: int) -> str | None:
    """What the delivery was answered when it asked the same before (read again after a crash), else None."""
    _sweep(c, now, SWEEP_LIMIT)
    kept = c.execute(
        "SELECT fingerprint, cuts FROM allot_deliveries WHERE project_id = ? AND delivery = ?", (project_id, delivery)
    ).fetchone()
    if kept is not None and kept[0] == asked:
        return kept[1]
    if kept is not None:
        log.warning("a delivery asked otherwise than before: counted again", delivery=delivery)
    return None


def _keep(c: sqlite3.Connection, project_id: str, delivery: str, asked: str, answer: str, now: int) -> None:
    c.execute(
        "INSERT OR REPLACE INTO allot_deliveries (project_id, delivery, fingerprint, cuts, created_ms)"
        " VALUES (?, ?, ?, ?, ?)",
        (project_id, delivery, asked, answer, now),
    )


def _tallies_fingerprint(tallies: Sequence[Tally]) -> str:
    """What a delivery's tallies asked, in a few bytes: each one's user, side, currency, units and span of times (the
    same records make the same tallies; a delivery asking otherwise changes one of these)."""
    asked = "\x1f".join(
        f"{_user(t.user)}\x1e{t.side}\x1e{t.currency}\x1e{t.units}\x1e{len(t.times)}\x1e{min(t.times)}\x1e{max(t.times)}"
        for t in tallies
    )
    return hashlib.blake2b(asked.encode(), digest_size=16).hexdigest()


def _chunks(items: list) -> list[list]:
    return [items[start : start + _CHUNK] for start in range(0, len(items), _CHUNK)]


def _marks(chunk: list) -> str:
    return ", ".join("?" * len(chunk))


def _first_time(c: sqlite3.Connection, project_id: str, token: str, now: int) -> bool:
    """Whether a release of `token` (an expired check's id, a delivery's give-back) is its first (remembered
    RELEASES_KEPT_MS)."""
    c.execute("DELETE FROM allot_released WHERE created_ms <= ?", (now - RELEASES_KEPT_MS,))
    added = c.execute(
        "INSERT OR IGNORE INTO allot_released (project_id, check_id, created_ms) VALUES (?, ?, ?)",
        (project_id, token, now),
    )
    return added.rowcount == 1


def _lower(c: sqlite3.Connection, project_id: str, key: str, units: int) -> None:
    """A counter that exists drops by `units`, never below 0 (units as text: they outgrow 64 bits)."""
    row = c.execute("SELECT units FROM allot_counters WHERE project_id = ? AND key = ?", (project_id, key)).fetchone()
    if row is not None:
        c.execute(
            "UPDATE allot_counters SET units = ? WHERE project_id = ? AND key = ?",
            (str(max(int(row[0]) - units, 0)), project_id, key),
        )


def _sweep(c: sqlite3.Connection, now: int, limit: int) -> None:
    """Counters and rolling grants past their keeping, and deliveries' grants never forgotten (a crash after their
    write)."""
    c.execute(
        "DELETE FROM allot_counters WHERE (project_id, key) IN (SELECT project_id, key FROM allot_counters"
        " WHERE expires_ms IS NOT NULL AND expires_ms <= ? ORDER BY expires_ms LIMIT ?)",
        (now, limit),
    )
    c.execute(
        "DELETE FROM allot_history WHERE rowid IN (SELECT rowid FROM allot_history WHERE expires_ms <= ?"
        " ORDER BY expires_ms LIMIT ?)",
        (now, limit),
    )
    c.execute(
        "DELETE FROM allot_deliveries WHERE (project_id, delivery) IN (SELECT project_id, delivery"
        " FROM allot_deliveries WHERE created_ms <= ? ORDER BY created_ms LIMIT ?)",
        (now - GRANTS_KEPT_MS, limit),
    )
