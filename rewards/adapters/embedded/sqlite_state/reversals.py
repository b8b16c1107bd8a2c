"""ReversalStore on SQLite: each event's reversed share and its reversals' digests, one row per event, settled in the
transaction that publishes their records (API.md §9)."""

import json
import sqlite3
import uuid
from collections.abc import Mapping, Sequence
from contextlib import asynccontextmanager
from decimal import Decimal

from rewards.adapters.embedded.sqlite_state.base import SWEEP_LIMIT, SqliteStateBase
from rewards.domain import reversals as rules
from rewards.domain.allotment import KEPT_MS
from rewards.domain.claim_checks import from_record, to_record
from rewards.domain.reversals import Owed, Reversal, TakeBack
from rewards.domain.timestamps import now_ms
from rewards.ports import Change
from schemas.records import ClaimCheckRecord, dump_records

_DAY_MS = 86_400_000


class SqliteReversalStore(SqliteStateBase):
    """An event's row is kept for the dedup window after its last reversal (`_window_ms`: SqliteIngestStore's)."""

    _window_ms: int = 35 * _DAY_MS

    @asynccontextmanager
    async def reverse(self, project_id: str, reversals: Sequence[Reversal], reversed_at_ms: int):
        async with self._db.transaction():
            settled = await self._db.run(lambda c: self._settle(c, project_id, reversals))
            records = rules.records(project_id, settled, [uuid.uuid4().hex for _ in settled.steps], reversed_at_ms)
            yield Change(len(records), dump_records(records) if records else None)

    def _settle(self, c: sqlite3.Connection, project_id: str, reversals: Sequence[Reversal]) -> rules.Settled:
        now = now_ms()
        events = list(dict.fromkeys(r.dedup_id for r in reversals))
        held = {row["dedup_id"]: row for row in self._rows(c, project_id, events, now - self._window_ms)}
        shares = {d: Decimal(row["reversed"]) for d, row in held.items()}
        digests = {d: json.loads(row["digests"]) for d, row in held.items()}
        seen = {digest for listed in digests.values() for digest in listed}
        settled = rules.settle(reversals, shares, seen, {d: len(listed) for d, listed in digests.items()})
        for step in settled.steps:
            digests.setdefault(step.reversal.dedup_id, []).append(step.reversal.digest())
        c.executemany(
            "INSERT INTO reversals (project_id, dedup_id, reversed, digests, updated_ms) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (project_id, dedup_id) DO UPDATE SET reversed = excluded.reversed, "
            "digests = excluded.digests, updated_ms = excluded.updated_ms",
            [(project_id, d, str(after), json.dumps(digests[d]), now) for d, (_, after) in settled.shares.items()],
        )
        c.execute(
            "DELETE FROM reversals WHERE (project_id, dedup_id) IN (SELECT project_id, dedup_id FROM reversals "
            "WHERE updated_ms <= ? ORDER BY updated_ms LIMIT ?)",
            (now - self._window_ms, SWEEP_LIMIT),
        )
        return settled

    @staticmethod
    def _rows(c: sqlite3.Connection, project_id: str, dedup_ids: list[str], cutoff: int) -> list[sqlite3.Row]:
        marks = ",".join("?" * len(dedup_ids))
        return c.execute(
            "SELECT dedup_id, reversed, digests, written FROM reversals "
            f"WHERE project_id = ? AND dedup_id IN ({marks}) AND updated_ms > ?",
            (project_id, *dedup_ids, cutoff),
        ).fetchall()

    async def mark_reversed(self, project_id: str, shares: Mapping[str, Decimal]) -> None:
        marks = [(rules.share_text(share), project_id, dedup_id) for dedup_id, share in shares.items()]
        if marks:
            await self._db.run(
                lambda c: c.executemany(
                    "UPDATE reversals SET written = max(coalesce(written, ''), ?) "
                    "WHERE project_id = ? AND dedup_id = ?",
                    marks,
                )
            )

    async def reversed_shares(self, project_id: str, dedup_ids: Sequence[str]) -> dict[str, Decimal]:
        dedup_ids = list(dict.fromkeys(dedup_ids))
        if not dedup_ids:
            return {}
        cutoff = now_ms() - self._window_ms
        rows = await self._db.run(lambda c: self._rows(c, project_id, dedup_ids, cutoff))
        return {row["dedup_id"]: rules.share_of(row["written"]) for row in rows if row["written"]}

    async def take_back(self, project_id: str, token: str, items: Sequence[TakeBack]):
        def call(c: sqlite3.Connection) -> tuple[str, bool]:
            ids = list(dict.fromkeys(item.check_id for item in items))
            rows = c.execute(
                f"SELECT id, record FROM claim_checks WHERE project_id = ? AND id IN ({','.join('?' * len(ids))})",
                (project_id, *ids),
            ).fetchall()
            checks = {row["id"]: from_record(ClaimCheckRecord.model_validate_json(row["record"])) for row in rows}
            changed, debts, added = rules.take_back(items, checks, self._debts(c, project_id, items))
            c.executemany(
                "UPDATE claim_checks SET record = ? WHERE project_id = ? AND id = ?",
                [(to_record(project_id, check).model_dump_json(), project_id, i) for i, check in changed.items()],
            )
            self._owe(c, project_id, debts)
            answer = {"checks": [to_record(project_id, check).model_dump_json() for check in changed.values()],
                      "added": added}  # fmt: skip
            return json.dumps(answer), bool(changed or debts)

        answer = json.loads(await self._once(project_id, token, call))
        return [from_record(ClaimCheckRecord.model_validate_json(r)) for r in answer["checks"]], answer["added"]

    async def settle_debts(self, project_id: str, token: str, asks: Sequence[Owed]) -> list[int]:
        def call(c: sqlite3.Connection) -> tuple[str, bool]:
            left, settled = rules.settle_debts(asks, self._debts(c, project_id, asks))
            self._owe(c, project_id, left)
            return json.dumps(settled), bool(left)

        return json.loads(await self._once(project_id, token, call))

    async def _once(self, project_id: str, token: str, call) -> str:
        """`call`'s answer, from one transaction, once per token: a call made again gets the kept answer. `call`
        answers (its answer, whether it changed anything)."""
        now = now_ms()

        def once(c: sqlite3.Connection) -> str:
            c.execute("DELETE FROM debt_calls WHERE created_ms <= ?", (now - KEPT_MS,))
            kept = c.execute(
                "SELECT answer FROM debt_calls WHERE project_id = ? AND token = ?", (project_id, token)
            ).fetchone()
            if kept is not None:
                return kept[0]
            answer, changes = call(c)
            if not changes:  # nothing changed: nothing to keep (asked again, it answers the same)
                return answer
            c.execute(
                "INSERT INTO debt_calls (project_id, token, answer, created_ms) VALUES (?, ?, ?, ?)",
                (project_id, token, answer, now),
            )
            return answer

        async with self._db.transaction():
            return await self._db.run(once)

    @staticmethod
    def _debts(c: sqlite3.Connection, project_id: str, asked: Sequence) -> dict[rules.DebtKey, int]:
        found = {}
        for user, currency in dict.fromkeys((item.user, item.currency) for item in asked):
            row = c.execute(
                "SELECT units FROM debts WHERE project_id = ? AND user_type = ? AND user_id = ? AND currency = ?",
                (project_id, user.identifier_type, user.identifier, currency),
            ).fetchone()
            if row is not None:
                found[(user, currency)] = int(row[0])
        return found

    @staticmethod
    def _owe(c: sqlite3.Connection, project_id: str, debts: Mapping[rules.DebtKey, int]) -> None:
        """The debts' new units (0: none left, the row goes)."""
        for (user, currency), units in debts.items():
            who = (project_id, user.identifier_type, user.identifier, currency)
            if units:
                c.execute(
                    "INSERT INTO debts (project_id, user_type, user_id, currency, units) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (project_id, user_type, user_id, currency) DO UPDATE SET units = excluded.units",
                    (*who, str(units)),
                )
            else:
                c.execute(
                    "DELETE FROM debts WHERE project_id = ? AND user_type = ? AND user_id = ? AND currency = ?", who
                )
