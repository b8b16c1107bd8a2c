"""What the SQLite adapter's port classes share: SqliteStateBase, the database they all run on."""

from rewards.adapters.embedded.sqlite_db import SqliteDatabase

SWEEP_LIMIT = 256  # rows of each table deleted at most per sweep (one per ingest, which adds at most 100)


class SqliteStateBase:
    """The database, which every port class of the SQLite adapter runs on."""

    def __init__(self, db: SqliteDatabase):
        self._db = db

    @property
    def database(self) -> SqliteDatabase:
        """The store's SQLite database, which the embedded outbox shares (a change and its publish: one transaction)."""
        return self._db

    async def ping(self) -> None:
        await self._db.run(lambda c: c.execute("SELECT 1").fetchone())

    async def close(self) -> None:
        await self._db.close()
