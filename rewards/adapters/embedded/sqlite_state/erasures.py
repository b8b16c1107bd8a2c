"""ErasureStore on SQLite: the requests, and every table that names a user rewritten in one transaction."""

import sqlite3
from collections.abc import Mapping, Sequence
from decimal import Decimal

from rewards.adapters.embedded.sqlite_state.base import SWEEP_LIMIT, SqliteStateBase
from rewards.domain import erasure
from rewards.domain.erasure import Erasure
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms

# The columns naming a user, as (type, identifier) pairs, and whether a row of the pseudonym may already be there
# (the pair is part of the table's primary key): then the renamed row is merged into it (`_MERGED`) or dropped.
_USER_COLUMNS = (
    ("affiliates", "user_type", "user_id", True),
    ("codes", "owner_type", "owner_id", False),
    ("code_uses", "user_type", "user_id", False),
    ("referrals", "user_type", "user_id", True),
    ("referrals", "referrer_type", "referrer_id", False),
    ("user_events", "user_type", "user_id", True),
    ("claim_checks", "user_type", "user_id", False),
    ("blocklist", "user_type", "user_id", True),
    ("debts", "user_type", "user_id", True),
)
# Keyed tables whose rows for the same key add up: a renamed row meeting its pseudonym's is summed into it.
_MERGED = {"debts": ("units", ("currency",))}
# Texts that end in `|<type>:<identifier>` (rewards.domain.allotment's counter and history keys).
_USER_SUFFIXED = (("allot_counters", "key", True), ("allot_history", "key", False))
# JSON documents that may name a user anywhere, and how to find their row again.
_DOCUMENTS = (
    ("codes", "proof", ("code",)),
    ("code_uses", "proof", ("rowid",)),
    ("claim_checks", "record", ("id",)),
    ("held_payouts", "row", ("payout_id",)),
    ("webhook_deliveries", "document", ("id",)),
    ("webhook_feed", "payload", ("id",)),
    ("outbox", "payload", ("id",)),
    ("idempotency", "response", ("key",)),
    ("debt_calls", "answer", ("token",)),
    ("allot_deliveries", "cuts", ("delivery",)),
)
_US = "\x1f"  # tracking's `<user><US><tracking id>` keys


class SqliteErasureStore(SqliteStateBase):
    """The reference adapter of rewards.ports.ErasureStore."""

    async def request_erasure(self, project_id: str, user: User) -> str:
        def request(c: sqlite3.Connection) -> str:
            pending = c.execute(
                "SELECT id FROM erasures WHERE project_id = ? AND user_type = ? AND user_id = ? AND done_ms IS NULL",
                (project_id, user.identifier_type, user.identifier),
            ).fetchone()
            if pending is not None:
                return pending["id"]
            c.execute("INSERT OR IGNORE INTO erasure_salts VALUES (?, ?)", (project_id, erasure.new_salt()))
            (salt,) = c.execute("SELECT salt FROM erasure_salts WHERE project_id = ?", (project_id,)).fetchone()
            erasure_id = erasure.new_erasure_id()
            c.execute(
                "INSERT INTO erasures (project_id, id, user_type, user_id, pseudonym, requested_ms)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (project_id, erasure_id, user.identifier_type, user.identifier,
                 erasure.pseudonym(salt, user).identifier, now_ms()),
            )  # fmt: skip
            return erasure_id

        return await self._db.run(request)

    async def erasure_status(self, project_id: str, erasure_id: str) -> str | None:
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT done_ms FROM erasures WHERE project_id = ? AND id = ?", (project_id, erasure_id)
            ).fetchone()
        )
        return None if row is None else "pending" if row["done_ms"] is None else "done"

    async def pending_erasures(self, limit: int) -> list[Erasure]:
        rows = await self._db.run(
            lambda c: c.execute(
                "SELECT project_id, id, user_type, user_id, pseudonym, requested_ms FROM erasures"
                " WHERE done_ms IS NULL ORDER BY requested_ms LIMIT ?",
                (limit,),
            ).fetchall()
        )
        return [
            Erasure(
                r["project_id"], r["id"], User(r["user_id"], r["user_type"]),
                User(r["pseudonym"], r["user_type"]), r["requested_ms"],
            )
            for r in rows
        ]  # fmt: skip

    async def erase_users(self, project_id: str, renames: Mapping[User, User]) -> None:
        def erase(c: sqlite3.Connection) -> None:
            for user, renamed in renames.items():
                _rename_columns(c, project_id, user, renamed)
                _rename_suffixes(c, project_id, user, renamed)
                _rename_tracking(c, project_id, user, renamed)
            _rewrite_documents(c, project_id, erasure.document_renames(renames))

        await self._db.run(erase)

    async def finish_erasures(self, erasures: Sequence[Erasure]) -> None:
        def finish(c: sqlite3.Connection) -> None:
            now = now_ms()
            c.executemany(
                "UPDATE erasures SET user_id = NULL, done_ms = ? WHERE project_id = ? AND id = ?",
                [(now, e.project_id, e.id) for e in erasures],
            )
            c.execute(
                "DELETE FROM erasures WHERE (project_id, id) IN"
                " (SELECT project_id, id FROM erasures WHERE done_ms < ? LIMIT ?)",
                (now - erasure.DONE_KEPT_MS, SWEEP_LIMIT),
            )

        await self._db.run(finish)


def _rename_columns(c: sqlite3.Connection, project_id: str, user: User, renamed: User) -> None:
    for table, type_column, id_column, keyed in _USER_COLUMNS:
        where = f"project_id = ? AND {type_column} = ? AND {id_column} = ?"
        if table in _MERGED:
            _merge_into(c, table, type_column, id_column, project_id, user, renamed)
        or_ignore = "OR IGNORE " if keyed else ""
        c.execute(
            f"UPDATE {or_ignore}{table} SET {id_column} = ? WHERE {where}",
            (renamed.identifier, project_id, user.identifier_type, user.identifier),
        )
        if keyed:  # the rows the pseudonym had already: kept, the user's own dropped
            c.execute(f"DELETE FROM {table} WHERE {where}", (project_id, user.identifier_type, user.identifier))
    c.execute(  # an affiliate's id is `<type>:<identifier>` (ingest_api.affiliates)
        "UPDATE affiliates SET id = ? WHERE project_id = ? AND user_type = ? AND user_id = ?",
        (f"{renamed.identifier_type}:{renamed.identifier}", project_id, renamed.identifier_type, renamed.identifier),
    )


def _merge_into(c, table: str, type_column: str, id_column: str, project_id: str, user: User, renamed: User) -> None:
    """Rows of `user` whose key the pseudonym holds too: their amounts added into the pseudonym's (the user's are
    dropped by the caller)."""
    amount, keys = _MERGED[table]
    match = " AND ".join(f"{key} = ?" for key in keys)
    mine = f"project_id = ? AND {type_column} = ? AND {id_column} = ?"
    mine_args = (project_id, user.identifier_type, user.identifier)
    rows = c.execute(f"SELECT {amount}, {', '.join(keys)} FROM {table} WHERE {mine}", mine_args).fetchall()
    for row in rows:
        where = f"project_id = ? AND {type_column} = ? AND {id_column} = ? AND {match}"
        args = (project_id, renamed.identifier_type, renamed.identifier, *(row[key] for key in keys))
        theirs = c.execute(f"SELECT {amount} FROM {table} WHERE {where}", args).fetchone()
        if theirs is not None:
            total = str(Decimal(theirs[amount]) + Decimal(row[amount]))
            c.execute(f"UPDATE {table} SET {amount} = ? WHERE {where}", (total, *args))


def _rename_suffixes(c: sqlite3.Connection, project_id: str, user: User, renamed: User) -> None:
    old, new = f"|{user.identifier_type}:{user.identifier}", f"|{renamed.identifier_type}:{renamed.identifier}"
    for table, column, keyed in _USER_SUFFIXED:
        keys = c.execute(
            f"SELECT DISTINCT {column} FROM {table} WHERE project_id = ? AND substr({column}, -?) = ?",
            (project_id, len(old), old),
        ).fetchall()
        for (key,) in keys:
            renamed_key = key[: -len(old)] + new
            if keyed and _add_counter(c, project_id, key, renamed_key):
                continue
            c.execute(
                f"UPDATE {table} SET {column} = ? WHERE project_id = ? AND {column} = ?", (renamed_key, project_id, key)
            )


def _add_counter(c: sqlite3.Connection, project_id: str, old_key: str, new_key: str) -> bool:
    """A counter of the user whose pseudonym has one too: added into it, its own dropped. False if it has none."""
    theirs = c.execute(
        "SELECT units FROM allot_counters WHERE project_id = ? AND key = ?", (project_id, new_key)
    ).fetchone()
    if theirs is None:
        return False
    (mine,) = c.execute(
        "SELECT units FROM allot_counters WHERE project_id = ? AND key = ?", (project_id, old_key)
    ).fetchone()
    c.execute(
        "UPDATE allot_counters SET units = ? WHERE project_id = ? AND key = ?",
        (str(int(theirs["units"]) + int(mine)), project_id, new_key),
    )
    c.execute("DELETE FROM allot_counters WHERE project_id = ? AND key = ?", (project_id, old_key))
    return True


def _rename_tracking(c: sqlite3.Connection, project_id: str, user: User, renamed: User) -> None:
    old, new = f"{user.identifier_type}:{user.identifier}", f"{renamed.identifier_type}:{renamed.identifier}"
    c.execute(
        "UPDATE tracking SET value = ? WHERE project_id = ? AND kind = 'user' AND value = ?", (new, project_id, old)
    )
    rows = c.execute(
        "SELECT key FROM tracking WHERE project_id = ? AND kind = 'user_tracking' AND substr(key, 1, ?) = ?",
        (project_id, len(old) + 1, old + _US),
    ).fetchall()
    for row in rows:
        c.execute(
            "UPDATE OR REPLACE tracking SET key = ? WHERE project_id = ? AND kind = 'user_tracking' AND key = ?",
            (new + row["key"][len(old) :], project_id, row["key"]),
        )


def _rewrite_documents(c: sqlite3.Connection, project_id: str, renames: Mapping[str, str]) -> None:
    needles = list(renames)
    for table, column, keys in _DOCUMENTS:
        for start in range(0, len(needles), 50):  # instr() per identifier: SQLite finds the rows, Python rewrites them
            chunk = needles[start : start + 50]
            holds = " OR ".join(f"instr(CAST({column} AS TEXT), ?) > 0" for _ in chunk)
            rows = c.execute(
                f"SELECT {', '.join(keys)}, {column} FROM {table} WHERE project_id = ? AND ({holds})",
                (project_id, *chunk),
            ).fetchall()
            for row in rows:
                rewritten = erasure.rewrite_json_text(row[column], renames)
                if rewritten is None:
                    continue
                value = rewritten.encode() if isinstance(row[column], bytes) else rewritten
                match = " AND ".join(f"{key} = ?" for key in keys)
                c.execute(
                    f"UPDATE {table} SET {column} = ? WHERE project_id = ? AND {match}",
                    (value, project_id, *(row[key] for key in keys)),
                )
