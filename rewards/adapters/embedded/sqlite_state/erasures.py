"""ErasureStore on SQLite: the requests, and every table that names a user rewritten in one transaction."""

import sqlite3
from collections.abc import Mapping, Sequence
from decimal import Decimal

from rewards.adapters.embedded.sqlite_state.base import SWEEP_LIMIT, SqliteStateBase
from rewards.adapters.embedded.sqlite_state.tracking import _AFTER_SEPARATOR, _SEPARATOR
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


class SqliteErasureStore(SqliteStateBase):
    """The reference adapter of rewards.ports.ErasureStore."""

    async def request_erasure(self, project_id: str, user: User) -> str:
        def request(c: sqlite3.Connection) -> str:
            pending = c.execute(
                "SELECT id FROM erasures WHERE project_id = ? AND user_type = ? AND user_id = ? AND done_ms IS NULL"
                " AND taken_ms IS NULL",
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

    async def take_erasures(self, limit: int) -> list[Erasure]:
        def take(c: sqlite3.Connection) -> list:
            rows = c.execute(
                "SELECT project_id, id, user_type, user_id, pseudonym, requested_ms FROM erasures"
                " WHERE done_ms IS NULL ORDER BY requested_ms LIMIT ?",
                (limit,),
            ).fetchall()
            c.executemany(
                "UPDATE erasures SET taken_ms = ? WHERE project_id = ? AND id = ? AND taken_ms IS NULL",
                [(now_ms(), r["project_id"], r["id"]) for r in rows],
            )
            return rows

        rows = await self._db.run(take)
        return [
            Erasure(
                r["project_id"], r["id"], User(r["user_id"], r["user_type"]),
                User(r["pseudonym"], r["user_type"]), r["requested_ms"],
            )
            for r in rows
        ]  # fmt: skip

    async def erase_users(self, project_id: str, renames: Mapping[User, User]) -> None:
        texts = erasure.document_renames(renames)

        def erase(c: sqlite3.Connection) -> None:
            _load(c, renames)
            try:
                _rename_columns(c, project_id)
                _rename_counters(c, project_id, texts)
                _rename_tracking(c, project_id, renames)
                _rewrite_documents(c, project_id, texts)
            finally:
                c.execute("DROP TABLE temp.erasing")

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


def _load(c: sqlite3.Connection, renames: Mapping[User, User]) -> None:
    """The round's users, as a table the passes below join: each table is read once per round, not once per user."""
    c.execute(
        "CREATE TEMP TABLE erasing (type TEXT NOT NULL, old TEXT NOT NULL, new TEXT NOT NULL, PRIMARY KEY (type, old))"
    )
    c.executemany(
        "INSERT INTO temp.erasing VALUES (?, ?, ?)",
        [(user.identifier_type, user.identifier, renamed.identifier) for user, renamed in renames.items()],
    )


def _rename_columns(c: sqlite3.Connection, project_id: str) -> None:
    for table, type_column, id_column, keyed in _USER_COLUMNS:
        if table in _MERGED:
            _merge(c, table, type_column, id_column, project_id)
        c.execute(
            f"UPDATE {'OR IGNORE ' if keyed else ''}{table} SET {id_column} = e.new FROM temp.erasing AS e"
            f" WHERE {table}.project_id = ? AND {table}.{type_column} = e.type AND {table}.{id_column} = e.old",
            (project_id,),
        )
        if keyed:  # the rows the pseudonym had already: kept (merged above), the user's own dropped
            c.execute(
                f"DELETE FROM {table} WHERE project_id = ? AND ({type_column}, {id_column}) IN"
                " (SELECT type, old FROM temp.erasing)",
                (project_id,),
            )
    for table, type_column, id_column in (("codes", "owner_type", "owner_id"), ("code_uses", "user_type", "user_id")):
        c.execute(  # what the user signed (a signature gives the address back): dropped (erasure.PROOF_KEYS)
            f"UPDATE {table} SET proof = '{{}}' WHERE project_id = ? AND ({type_column}, {id_column}) IN"
            " (SELECT type, new FROM temp.erasing)",
            (project_id,),
        )
    c.execute(  # an affiliate's id is `<type>:<identifier>` (ingest_api.affiliates)
        "UPDATE affiliates SET id = user_type || ':' || user_id WHERE project_id = ? AND (user_type, user_id) IN"
        " (SELECT type, new FROM temp.erasing)",
        (project_id,),
    )


def _merge(c: sqlite3.Connection, table: str, type_column: str, id_column: str, project_id: str) -> None:
    """The user's rows whose key the pseudonym holds too: their amounts added into the pseudonym's (the user's are
    dropped by the caller)."""
    amount, keys = _MERGED[table]
    on = " AND ".join(f"mine.{key} = theirs.{key}" for key in keys)
    rows = c.execute(
        f"SELECT e.type, e.new, {', '.join(f'theirs.{key} AS {key}' for key in keys)}, mine.{amount} AS mine,"
        f" theirs.{amount} AS theirs FROM {table} AS mine"
        f" JOIN temp.erasing AS e ON mine.{type_column} = e.type AND mine.{id_column} = e.old"
        f" JOIN {table} AS theirs ON theirs.project_id = mine.project_id AND theirs.{type_column} = e.type"
        f" AND theirs.{id_column} = e.new AND {on} WHERE mine.project_id = ?",
        (project_id,),
    ).fetchall()
    for row in rows:
        total = str(Decimal(row["theirs"]) + Decimal(row["mine"]))
        where = " AND ".join(f"{key} = ?" for key in (type_column, id_column, *keys))
        c.execute(
            f"UPDATE {table} SET {amount} = ? WHERE project_id = ? AND {where}",
            (total, project_id, row["type"], row["new"], *(row[key] for key in keys)),
        )


def _rename_counters(c: sqlite3.Connection, project_id: str, texts: Mapping[str, str]) -> None:
    """Caps' counters and histories, named `…|<user>`: one pass over the project's names."""
    for table, column, keyed in _USER_SUFFIXED:
        names = c.execute(f"SELECT DISTINCT {column} FROM {table} WHERE project_id = ?", (project_id,)).fetchall()
        for (name,) in names:
            renamed = erasure.renamed_counter(name, texts)
            if renamed is None or (keyed and _add_counter(c, project_id, name, renamed)):
                continue
            c.execute(
                f"UPDATE {table} SET {column} = ? WHERE project_id = ? AND {column} = ?", (renamed, project_id, name)
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


def _rename_tracking(c: sqlite3.Connection, project_id: str, renames: Mapping[User, User]) -> None:
    c.execute(
        "UPDATE tracking SET value = e.type || ':' || e.new FROM temp.erasing AS e WHERE tracking.project_id = ?"
        " AND tracking.kind = 'user' AND tracking.value = e.type || ':' || e.old",
        (project_id,),
    )
    for user, renamed in renames.items():  # a user's bindings: a range of keys `<user><US>…` each (the primary key)
        old, new = f"{user.identifier_type}:{user.identifier}", f"{renamed.identifier_type}:{renamed.identifier}"
        rows = c.execute(
            "SELECT key FROM tracking WHERE project_id = ? AND kind = 'user_tracking' AND key >= ? AND key < ?",
            (project_id, old + _SEPARATOR, old + _AFTER_SEPARATOR),
        ).fetchall()
        for row in rows:
            c.execute(
                "UPDATE OR REPLACE tracking SET key = ? WHERE project_id = ? AND kind = 'user_tracking' AND key = ?",
                (new + row["key"][len(old) :], project_id, row["key"]),
            )


def _rewrite_documents(c: sqlite3.Connection, project_id: str, texts: Mapping[str, str]) -> None:
    """Every stored document of the project read once (erasure.renamed_text finds those naming a user)."""
    for table, column, keys in _DOCUMENTS:
        rows = c.execute(f"SELECT {', '.join(keys)}, {column} FROM {table} WHERE project_id = ?", (project_id,))
        changed = []
        for row in rows:
            stored = row[column]
            if stored is None:
                continue
            rewritten = erasure.renamed_text(stored.decode() if isinstance(stored, bytes) else stored, texts)
            if rewritten is not None:
                value = rewritten.encode() if isinstance(stored, bytes) else rewritten
                changed.append((value, project_id, *(row[key] for key in keys)))
        match = " AND ".join(f"{key} = ?" for key in keys)
        c.executemany(f"UPDATE {table} SET {column} = ? WHERE project_id = ? AND {match}", changed)
