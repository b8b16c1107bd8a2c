"""TrackingStore on SQLite (API.md §7): rows until their expiry, swept by each write."""

import sqlite3
import uuid
from collections.abc import Sequence
from contextlib import asynccontextmanager

from rewards.adapters.embedded.sqlite_state.base import SWEEP_LIMIT, SqliteStateBase
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms


class SqliteTrackingStore(SqliteStateBase):
    """The reference adapter of rewards.ports.TrackingStore."""

    @asynccontextmanager
    async def first_within(self, project_id: str, key: str, window_s: float):
        now = now_ms()
        token = uuid.uuid4().hex

        def claim(c: sqlite3.Connection) -> bool:
            _sweep_tracking(c, now, SWEEP_LIMIT)
            cursor = c.execute(
                "INSERT INTO tracking (project_id, kind, key, value, expires_ms) VALUES (?, 'repeat', ?, ?, ?) "
                "ON CONFLICT (project_id, kind, key) DO UPDATE SET value = excluded.value, "
                "expires_ms = excluded.expires_ms WHERE tracking.expires_ms <= ?",
                (project_id, key, token, now + _ms(window_s), now),
            )
            return cursor.rowcount == 1

        first = await self._db.run(claim)
        try:
            yield first
        except BaseException as exc:
            if first and getattr(exc, "maybe_published", False) is not True:
                await self._db.run(
                    lambda c: c.execute(
                        "DELETE FROM tracking WHERE project_id = ? AND kind = 'repeat' AND key = ? AND value = ?",
                        (project_id, key, token),
                    )
                )
            raise

    async def bind_code(self, project_id: str, tracking_id: str, code: str, ttl_s: float) -> None:
        await self._db.run(lambda c: _bind(c, project_id, "code", tracking_id, code, ttl_s))

    async def bind_user(self, project_id: str, tracking_id: str, user: User, ttl_s: float) -> str | None:
        def bind(c: sqlite3.Connection) -> str | None:
            _bind(c, project_id, "user", tracking_id, _user_text(user), ttl_s)
            # The other way round, every tracking id the user was bound to (API.md §8: two users one browser).
            _bind(c, project_id, "user_tracking", f"{_user_text(user)}{_SEPARATOR}{tracking_id}", tracking_id, ttl_s)
            return _bound(c, project_id, "code", tracking_id)

        return await self._db.run(bind)

    async def tracking_ids_of(self, project_id: str, users: Sequence[User]) -> dict[User, set[str]]:
        def read(c: sqlite3.Connection) -> dict[User, set[str]]:
            found: dict[User, set[str]] = {}
            now = now_ms()
            for user in dict.fromkeys(users):
                prefix = _user_text(user) + _SEPARATOR
                rows = c.execute(
                    "SELECT value FROM tracking WHERE project_id = ? AND kind = 'user_tracking' AND key >= ?"
                    " AND key < ? AND expires_ms > ?",
                    (project_id, prefix, _user_text(user) + _AFTER_SEPARATOR, now),
                ).fetchall()
                if rows:
                    found[user] = {row["value"] for row in rows}
            return found

        return await self._db.run(read)

    async def tracked_user(self, project_id: str, tracking_id: str) -> User | None:
        value = await self._db.run(lambda c: _bound(c, project_id, "user", tracking_id))
        if value is None:
            return None
        identifier_type, identifier = value.split(":", 1)
        return User(identifier, identifier_type)


# A user's tracking ids are the rows of kind 'user_tracking' keyed `<user><US><tracking id>`: a key range per user
# (no identifier holds the unit separator, U+001F: identifiers are validated, tracking ids are printable).
_SEPARATOR, _AFTER_SEPARATOR = "\x1f", "\x20"


def _user_text(user: User) -> str:
    return f"{user.identifier_type}:{user.identifier}"


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _bind(c: sqlite3.Connection, project_id: str, kind: str, tracking_id: str, value: str, ttl_s: float) -> None:
    now = now_ms()
    _sweep_tracking(c, now, SWEEP_LIMIT)
    c.execute(
        "INSERT INTO tracking (project_id, kind, key, value, expires_ms) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (project_id, kind, key) DO UPDATE SET value = excluded.value, expires_ms = excluded.expires_ms",
        (project_id, kind, tracking_id, value, now + _ms(ttl_s)),
    )


def _bound(c: sqlite3.Connection, project_id: str, kind: str, tracking_id: str) -> str | None:
    row = c.execute(
        "SELECT value FROM tracking WHERE project_id = ? AND kind = ? AND key = ? AND expires_ms > ?",
        (project_id, kind, tracking_id, now_ms()),
    ).fetchone()
    return None if row is None else row["value"]


def _sweep_tracking(c: sqlite3.Connection, now: int, limit: int) -> int:
    """Delete up to `limit` expired tracking rows (found by their expiry index: an empty sweep is one probe)."""
    return c.execute(
        "DELETE FROM tracking WHERE (project_id, kind, key) IN "
        "(SELECT project_id, kind, key FROM tracking WHERE expires_ms <= ? ORDER BY expires_ms LIMIT ?)",
        (now, limit),
    ).rowcount
