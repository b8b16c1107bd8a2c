"""The state store's part of a move (runtime.moving): the embedded state (SQLite, `state.sqlite3`) written into Redis
in the production store's own layout (rewards.adapters.production.redis_keys), table by table.

Each SQLite table is copied by one `TableCopy` of the modules `copies()` names (state_people, state_money), which know
both layouts: they read rows with a plain read-only connection, in chunks (memory stays bounded whatever the table's
size), and write the Redis keys through pipelines. Times to live are given from the rows' own times, as the
production store would have set them (a mark past its window is not copied). The embedded log's tables are not
copied: a move starts from a drained data dir (its outbox and webhook feed empty: runtime.moving refuses otherwise);
NOT_COPIED says which state is not, and why (tests/runtime/test_moving_state.py: every other table has its copy).

Before anything is written, the Redis must hold none of the data dir's projects and none of its API keys: a move
never merges into, nor overwrites, a store in use.
"""

import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from rewards.adapters.embedded.sqlite_db import SqliteDatabase
from rewards.adapters.production import redis_keys
from rewards.adapters.production.redis_client import RedisClient
from rewards.domain import sealing
from rewards.domain.timestamps import now_ms
from rewards.settings import Settings
from runtime.moving.refusals import MoveRefused

# The embedded log's own tables, never copied (a move starts from a drained data dir), and SQLite's own.
LOG_TABLES = ("outbox", "outbox_plan", "webhook_feed")
NOT_STATE = {*LOG_TABLES, "sqlite_sequence"}
# State tables not copied, and why.
NOT_COPIED = {
    # Each delivery's grants under caps and budgets, kept until its rows are written so that the same delivery seen
    # again gets the same grants: the embedded log's deliveries (`outbox:<first>-<last>`) are all written in a drained
    # data dir, and no production delivery (`<topic>:<partition>:<first>-<last>`) ever bears one of their tokens.
    "allot_deliveries",
}
# Copied last: a move that failed before them finds no project in the target, so it may be run again.
LAST = ("api_keys", "projects")
CHUNK = 1_000  # rows read, and keys written in one pipeline, at a time


@dataclass(frozen=True)
class Moving:
    """What every copy is given: the source (read-only), the target, the move's clock and the settings the production
    store runs with (windows and retentions: the keys' times to live)."""

    source: sqlite3.Connection
    redis: RedisClient
    now_ms: int
    settings: Settings


@dataclass(frozen=True)
class TableCopy:
    """The copy of SQLite tables (`tables`, read together) into their Redis keys; `copy` answers the rows copied."""

    tables: tuple[str, ...]
    copy: Callable[[Moving], Awaitable[int]]


def copies() -> list[TableCopy]:
    """Every table's copy, in the order they run: the projects and their keys last."""
    from runtime.moving import state_money, state_people

    every = [*state_people.COPIES, *state_money.COPIES]
    return sorted(every, key=lambda table_copy: table_copy.tables[0] in LAST)


def rows(source: sqlite3.Connection, sql: str, params: tuple = ()):
    """The rows of `sql`, a chunk (a list of sqlite3.Row) at a time."""
    cursor = source.execute(sql, params)
    while chunk := cursor.fetchmany(CHUNK):
        yield chunk


async def copy_rows(moving: Moving, sql: str, write: Callable, params: tuple = ()) -> int:
    """Each chunk of `sql`'s rows written by `write(pipeline, row)` in one pipeline; the rows copied."""
    copied = 0
    for chunk in rows(moving.source, sql, params):
        async with moving.redis.pipeline(transaction=False) as pipe:
            for row in chunk:
                write(pipe, row)
            await pipe.execute()
        copied += len(chunk)
    return copied


async def open_source(path: Path) -> sqlite3.Connection:
    """A read-only connection to the embedded state file, its schema first brought to the current version (the
    columns and tables a newer release adds), as `rewards serve` would."""
    if not path.exists():
        raise MoveRefused(f"no embedded state at {path}")
    await SqliteDatabase(path).close()
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    source.row_factory = sqlite3.Row
    return source


def state_tables(source: sqlite3.Connection) -> list[str]:
    found = source.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
    return [row["name"] for row in found if row["name"] not in NOT_STATE]


async def check_target(moving: Moving) -> None:
    """Refuse a Redis that already holds a project or an API key of the data dir."""
    held = []
    for chunk in rows(moving.source, "SELECT id FROM projects"):
        for row in chunk:
            if await moving.redis.exists(redis_keys.ProjectKeys(row["id"]).project()):
                held.append(f"project {row['id']}")
    for chunk in rows(moving.source, "SELECT id FROM api_keys"):
        for row in chunk:
            if await moving.redis.exists(redis_keys.api_key(row["id"])):
                held.append(f"API key {row['id']}")
    if held:
        raise MoveRefused(f"the Redis already holds {', '.join(held[:5])}{' …' if len(held) > 5 else ''}: move into a "
                          "Redis that holds none of the data dir's projects")  # fmt: skip


def resealed(moving: Moving, sealed: str) -> str:
    """A sealed secret as production keeps it: one the embedded server kept unencrypted (no REWARDS_SECRETS_KEY there)
    is encrypted with production's key when it has one; an encrypted one is copied as it is."""
    keys = moving.settings.secrets_keys
    if keys and not sealing.is_encrypted(sealed):
        return sealing.seal(sealing.unseal(sealed, keys), keys)
    return sealed


def check_sealed(moving: Moving) -> None:
    """Refuse claim signers' keys and webhook endpoints' secrets the production settings cannot open (another
    REWARDS_SECRETS_KEY): they are copied sealed as they are, never opened nor sealed again."""
    sealed = """SELECT project_id, 'the claim signer' AS what, sealed_key AS sealed FROM claim_signers
                UNION ALL SELECT project_id, 'webhook endpoint ' || id, json_extract(document, '$.sealed_secret')
                FROM webhook_endpoints"""
    for chunk in rows(moving.source, sealed):
        for row in chunk:
            try:
                sealing.unseal(row["sealed"], moving.settings.secrets_keys)
            except sealing.SecretUnreadable as unreadable:
                raise MoveRefused(
                    f"{row['what']} of project {row['project_id']}: {unreadable} (the production REWARDS_SECRETS_KEY "
                    "must hold the key the data dir's secrets were sealed with)"
                ) from None


async def check(path: Path, redis: RedisClient, settings: Settings) -> None:
    """Refuse, before anything is written, a Redis that already holds a project or an API key of the state file, and
    secrets the production settings cannot open."""
    source = await open_source(path)
    try:
        moving = Moving(source, redis, now_ms(), settings)
        check_sealed(moving)
        await check_target(moving)
    finally:
        source.close()


async def copy_state(path: Path, redis: RedisClient, settings: Settings, progress=None) -> dict[str, int]:
    """Check the target (`check`), then copy the state file at `path` into `redis`: {table(s): rows copied}."""
    await check(path, redis, settings)
    return await copy_tables(path, redis, settings, progress)


async def copy_tables(path: Path, redis: RedisClient, settings: Settings, progress=None) -> dict[str, int]:
    """Copy the state file at `path` into `redis` (once `check` passed); {table(s): rows copied}. `progress(tables,
    rows)` after each."""
    source = await open_source(path)
    try:
        moving = Moving(source, redis, now_ms(), settings)
        copied = {}
        for table_copy in copies():
            name = "+".join(table_copy.tables)
            copied[name] = await table_copy.copy(moving)
            if progress is not None:
                progress(name, copied[name])
        return copied
    finally:
        source.close()
