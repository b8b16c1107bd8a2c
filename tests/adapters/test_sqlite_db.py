"""The embedded SQLite database: a failure SQLite rolls back by itself surfaces as itself."""

import sqlite3

import pytest

from rewards.adapters.embedded.sqlite_db import SqliteDatabase


@pytest.fixture
async def full_db(tmp_path):
    """A database that can grow no more: what a full disk looks like to SQLite (SQLITE_FULL)."""
    db = SqliteDatabase(tmp_path / "state.sqlite3")
    await db.run(lambda c: c.execute("CREATE TABLE blobs (data BLOB)"))
    pages = await db.run(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
    await db.run(lambda c: c.execute(f"PRAGMA max_page_count = {pages}"))
    yield db
    await db.close()


def _fill(c: sqlite3.Connection) -> None:
    c.execute("INSERT INTO blobs VALUES (?)", (b"x" * 1_000_000,))


async def test_a_full_disk_inside_run_raises_the_full_disk(full_db):
    with pytest.raises(sqlite3.OperationalError, match="full"):
        await full_db.run(_fill)
    assert await full_db.run(lambda c: c.execute("SELECT count(*) FROM blobs").fetchone()[0]) == 0


async def test_a_full_disk_inside_a_transaction_raises_the_full_disk(full_db):
    with pytest.raises(sqlite3.OperationalError, match="full"):
        async with full_db.transaction():
            await full_db.run(_fill)
    assert await full_db.run(lambda c: c.execute("SELECT count(*) FROM blobs").fetchone()[0]) == 0
