"""Warehouse on a ClickHouse server through clickhouse-connect: the same DDL, inserts and queries as chdb.

Queries ask for the JSON format, as the embedded adapter does, so both engines hand the read models
identical rows (64-bit integers and decimals as ClickHouse writes them in JSON).
"""

import orjson

from rewards import migrations
from rewards.clickhouse_values import param_value
from schemas.clickhouse import INSERT_SETTINGS


class ClickHouseWarehouse:
    def __init__(self, client):
        self._client = client

    @classmethod
    async def connect(cls, url: str) -> "ClickHouseWarehouse":
        import clickhouse_connect

        return cls(await clickhouse_connect.get_async_client(dsn=url))

    async def migrate(self) -> None:
        await migrations.migrate(self)

    async def command(self, sql: str) -> None:
        await self._client.command(sql)

    async def insert(self, table: str, rows: list[dict], dedup_token: str) -> None:
        if not rows:
            return
        body = orjson.dumps(rows)  # JSONEachRow reads a JSON array of rows too: one call instead of one per row
        settings = {**INSERT_SETTINGS, "insert_deduplication_token": dedup_token}
        await self._client.raw_insert(table, insert_block=body, settings=settings, fmt="JSONEachRow")

    async def query(self, sql: str, params: dict | None = None) -> list[dict]:
        # clickhouse-connect escapes the values itself (server-side binding): they must not be escaped before.
        params = {name: param_value(value) for name, value in params.items()} if params else None
        result = await self._client.raw_query(sql, parameters=params, fmt="JSON")
        return orjson.loads(result)["data"] if result else []

    async def close(self) -> None:
        await self._client.close()
