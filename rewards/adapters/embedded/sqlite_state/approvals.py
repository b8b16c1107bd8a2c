"""ApprovalStore on SQLite: payouts held for an operator's decision, one row each, decided in the transaction that
publishes the decisions' records (API.md §9)."""

import json
import sqlite3
from collections.abc import Sequence
from contextlib import asynccontextmanager

from rewards.adapters.embedded.sqlite_state.base import SWEEP_LIMIT, SqliteStateBase
from rewards.domain.allotment import KEPT_MS
from rewards.domain.approvals import NotPending, decision_record
from rewards.domain.timestamps import now_ms
from rewards.ports import Change
from schemas.records import PayoutDecisionRecord, dump_records


class SqliteApprovalStore(SqliteStateBase):
    async def hold_payouts(self, project_id: str, held: Sequence[dict]) -> None:
        rows = [(project_id, row["payout_id"], json.dumps(row)) for row in held]
        if rows:
            await self._db.run(
                lambda c: c.executemany(
                    "INSERT OR IGNORE INTO held_payouts (project_id, payout_id, row) VALUES (?, ?, ?)", rows
                )
            )

    @asynccontextmanager
    async def decide_payouts(
        self, project_id: str, payout_ids: Sequence[str], decision: str, reason: str | None, decided_at_ms: int
    ):
        ids = list(dict.fromkeys(payout_ids))

        def decide(c: sqlite3.Connection) -> list[PayoutDecisionRecord]:
            records = []
            for payout_id in ids:
                row = c.execute(
                    "SELECT row FROM held_payouts WHERE project_id = ? AND payout_id = ? AND decided_ms IS NULL",
                    (project_id, payout_id),
                ).fetchone()
                if row is None:
                    raise NotPending(payout_id)
                payout = json.loads(row[0])
                records.append(decision_record(project_id, payout_id, decision, reason, decided_at_ms, payout))
            now = now_ms()  # (the store's time: the sweep's, whatever the caller's decided_at_ms)
            c.executemany(
                "UPDATE held_payouts SET decided_ms = ? WHERE project_id = ? AND payout_id = ?",
                [(now, project_id, payout_id) for payout_id in ids],
            )
            c.execute(
                "DELETE FROM held_payouts WHERE rowid IN (SELECT rowid FROM held_payouts WHERE decided_ms <= ? "
                "LIMIT ?)",
                (now - KEPT_MS, SWEEP_LIMIT),
            )  # decided 35 days ago: no delivery is processed again that late
            return records

        async with self._db.transaction():
            records = await self._db.run(decide)
            yield Change(len(records), dump_records(records) if records else None)
