"""AffiliateStore on SQLite: one row an affiliate, one column an attribute."""

import sqlite3
from collections.abc import Sequence
from contextlib import asynccontextmanager

from rewards.adapters.embedded.sqlite_state.base import SqliteStateBase
from rewards.domain.affiliates import affiliate_record, stored_affiliate, stored_attributes
from rewards.domain.payouts import User
from rewards.ports import Affiliate, Change
from schemas.records import dump_records


class SqliteAffiliateStore(SqliteStateBase):
    """The reference adapter of rewards.ports.AffiliateStore."""

    @asynccontextmanager
    async def create_affiliate(self, project_id: str, affiliate: Affiliate):
        row = _affiliate_row(project_id, affiliate)
        insert = f"INSERT OR IGNORE INTO affiliates ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})"
        async with self._db.transaction():
            cursor = await self._db.run(lambda c: c.execute(insert, tuple(row.values())))
            created = cursor.rowcount == 1
            yield Change(created, dump_records([affiliate_record(project_id, affiliate)]) if created else None)

    async def get_affiliate(self, project_id: str, user: User) -> Affiliate | None:
        return (await self.affiliates_among(project_id, [user])).get(user)

    async def affiliates_among(self, project_id: str, users: Sequence[User]) -> dict[User, Affiliate]:
        def read(c: sqlite3.Connection) -> dict[User, Affiliate]:
            found = {}
            for user in users:
                row = c.execute(
                    "SELECT * FROM affiliates WHERE project_id = ? AND user_type = ? AND user_id = ?",
                    (project_id, user.identifier_type, user.identifier),
                ).fetchone()
                if row is not None:
                    found[user] = _affiliate(user, row)
            return found

        return await self._db.run(read)


# The affiliates table's columns (rewards.adapters.embedded.sqlite_db) named otherwise than the attributes they hold.
_AFFILIATE_COLUMNS = {"created_at_ms": "created_ms"}
_AFFILIATE_ATTRIBUTES = {column: name for name, column in _AFFILIATE_COLUMNS.items()}


def _affiliate_row(project_id: str, a: Affiliate) -> dict:
    attributes = {_AFFILIATE_COLUMNS.get(name, name): value for name, value in stored_attributes(a).items()}
    return {"project_id": project_id, "user_type": a.user.identifier_type, "user_id": a.user.identifier, **attributes}


def _affiliate(user: User, row: sqlite3.Row) -> Affiliate:
    columns = zip(row.keys(), row, strict=True)
    return stored_affiliate(user, {_AFFILIATE_ATTRIBUTES.get(column, column): value for column, value in columns})
