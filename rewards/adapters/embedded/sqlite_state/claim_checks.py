"""ClaimCheckStore on SQLite: one row a check, holding its ClaimCheckRecord."""

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager

from rewards.adapters.embedded.sqlite_state.base import SqliteStateBase
from rewards.domain.claim_checks import ClaimCheck, ClaimCheckNotFound, from_record, to_record
from rewards.domain.payouts import User
from rewards.ports import Change
from schemas.records import ClaimCheckRecord, dump_records


class SqliteClaimCheckStore(SqliteStateBase):
    """The reference adapter of rewards.ports.ClaimCheckStore."""

    async def register_claim_checks(self, project_id: str, checks: Sequence[ClaimCheck]) -> None:
        rows = [
            (project_id, check.id, check.user.identifier_type, check.user.identifier,
             to_record(project_id, check).model_dump_json())
            for check in checks
        ]  # fmt: skip
        await self._db.run(
            lambda c: c.executemany(
                "INSERT OR IGNORE INTO claim_checks (project_id, id, user_type, user_id, record) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )
        )

    @asynccontextmanager
    async def update_claim_checks(
        self, project_id: str, ids: Sequence[str], change: Callable[[ClaimCheck], ClaimCheck], owner: User | None
    ):
        def update(c: sqlite3.Connection) -> list[ClaimCheck]:
            changed = [change(self._claim_check(c, project_id, check_id, owner)) for check_id in ids]
            c.executemany(
                "UPDATE claim_checks SET record = ? WHERE project_id = ? AND id = ?",
                [(to_record(project_id, check).model_dump_json(), project_id, check.id) for check in changed],
            )
            return changed

        async with self._db.transaction():
            changed = await self._db.run(update)
            yield Change(changed, dump_records([to_record(project_id, c) for c in changed]) if changed else None)

    @staticmethod
    def _claim_check(c: sqlite3.Connection, project_id: str, check_id: str, owner: User | None) -> ClaimCheck:
        row = c.execute("SELECT * FROM claim_checks WHERE project_id = ? AND id = ?", (project_id, check_id)).fetchone()
        owned = owner is None or (row is not None and User(row["user_id"], row["user_type"]) == owner)
        if row is None or not owned:
            raise ClaimCheckNotFound(f"claim check {check_id} not found")
        return from_record(ClaimCheckRecord.model_validate_json(row["record"]))

    async def get_claim_checks(self, project_id: str, ids: Sequence[str]) -> list[ClaimCheck]:
        def read(c: sqlite3.Connection) -> dict[str, str]:
            rows = c.execute(
                f"SELECT id, record FROM claim_checks WHERE project_id = ? AND id IN ({','.join('?' * len(ids))})",
                (project_id, *ids),
            ).fetchall()
            return {row["id"]: row["record"] for row in rows}

        found = await self._db.run(read) if ids else {}
        return [from_record(ClaimCheckRecord.model_validate_json(found[i])) for i in dict.fromkeys(ids) if i in found]
