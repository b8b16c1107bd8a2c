"""Warehouse on chdb: ClickHouse's own engine in-process, running the very same SQL as a server."""

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

from rewards.adapters import migrations
from schemas.clickhouse import INSERT_SETTINGS
from schemas.clickhouse.values import param_text

CONFIG = Path(__file__).with_name("chdb_backups.xml")  # lets BACKUP and RESTORE write and read files
_TOKEN = re.compile(r"^[A-Za-z0-9:_.-]{1,200}$")
_TABLE = re.compile(r"^[a-z_][a-z0-9_]*$")


class ChdbWarehouse:
    def __init__(self, path: Path):
        import chdb  # imported here: loading the engine takes a moment and most commands never need it

        path.mkdir(parents=True, exist_ok=True)
        self._conn = chdb.connect(f"file:{path}?config-file={CONFIG}")
        # One engine per process and its connection is not thread-safe: every call goes through one thread.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chdb")

    async def migrate(self) -> None:
        await migrations.migrate(self)

    async def command(self, sql: str) -> None:
        await self._run(sql, None, "TabSeparated")

    async def insert(self, table: str, rows: list[dict], dedup_token: str) -> None:
        if not rows:
            return
        if not _TABLE.match(table) or not _TOKEN.match(dedup_token):
            raise ValueError("invalid table name or deduplication token")
        settings = {**INSERT_SETTINGS, "insert_deduplication_token": dedup_token}
        setting_text = ", ".join(f"{k} = {v!r}" if isinstance(v, str) else f"{k} = {v}" for k, v in settings.items())
        body = orjson.dumps(rows).decode()  # JSONEachRow reads a JSON array of rows too
        await self._run(f"INSERT INTO {table} SETTINGS {setting_text} FORMAT JSONEachRow\n{body}", None, "TabSeparated")

    async def query(self, sql: str, params: dict | None = None) -> list[dict]:
        # chdb hands the text to the engine as is: param_text escapes it as ClickHouse reads parameters.
        params = None if params is None else {name: param_text(value) for name, value in params.items()}
        result = await self._run(sql, params, "JSON")
        return orjson.loads(result)["data"] if result else []

    async def backup_to(self, folder: Path) -> None:
        """ClickHouse's own BACKUP of every table and view into `folder` (made by it; a consistent copy of each table
        as of the statement: hold the writers back for one across tables)."""
        await self.query("BACKUP DATABASE default TO File({folder:String})", {"folder": str(folder)})

    async def restore_from(self, folder: Path) -> None:
        """RESTORE what `backup_to` wrote into this engine, whose tables must not exist yet."""
        await self.query("RESTORE DATABASE default FROM File({folder:String})", {"folder": str(folder)})

    async def _run(self, sql: str, params: dict | None, fmt: str) -> bytes:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._query, sql, params, fmt)

    def _query(self, sql: str, params: dict | None, fmt: str) -> bytes:
        result = self._conn.query(sql, fmt, params=params) if params else self._conn.query(sql, fmt)
        return result.bytes()

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._conn.close)
        self._executor.shutdown(wait=True)
