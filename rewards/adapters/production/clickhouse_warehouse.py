"""Warehouse on a ClickHouse server through clickhouse-connect: the same DDL, inserts and queries as chdb.

Queries ask for the JSON format, as the embedded adapter does, so both engines hand the read models
identical rows (64-bit integers and decimals as ClickHouse writes them in JSON).

On a cluster (REWARDS_CLICKHOUSE_CLUSTER, schemas/clickhouse/layout.py) the code still reads and inserts the
plain table names, now Distributed tables sharded by project: the settings below, sent with every request, make
each behave as the table it fronts (where the tables are plain they change nothing, so no process but
`rewards migrate` needs to know the layout). `ClickHouseWarehouse.cluster` tells the migration runner the layout
and the nodes to create each node's tables on.
"""

from typing import BinaryIO
from urllib.parse import urlsplit, urlunsplit

import orjson

from rewards.adapters import migrations
from rewards.settings import Settings
from schemas.clickhouse import INSERT_SETTINGS
from schemas.clickhouse.layout import Layout
from schemas.clickhouse.values import param_value

DISTRIBUTED_SETTINGS = {
    # An insert returns once every shard has its rows: a worker's delivery is written (and its deduplication
    # token known on each shard) before the worker marks it done, as on one node.
    "distributed_foreground_insert": 1,
    # A subquery (IN, JOIN) of another table reads the shard's own `_local` table: a project's rows of every
    # table are on one shard (the default refuses such double-distributed subqueries).
    "distributed_product_mode": "local",
    # A query of one project (`project_id = ...`) is sent to that project's shard only.
    "optimize_skip_unused_shards": 1,
}


def async_insert_settings(busy_ms: int) -> dict:
    """Settings that make an insert an async insert gathered with others for up to `busy_ms`, returning once written
    (so `conversions` is readable before the payout tables' views read it, and `dedup_ids` stays the last written)."""
    if busy_ms <= 0:
        return {}
    busy = {"async_insert_busy_timeout_max_ms": busy_ms, "async_insert_busy_timeout_min_ms": min(busy_ms, 10)}
    return {"async_insert": 1, "wait_for_async_insert": 1, "async_insert_deduplicate": 1, **busy}


class ClickHouseWarehouse:
    def __init__(self, client, cluster: migrations.Cluster | None = None, async_insert_ms: int = 0):
        self._client = client
        self.cluster = cluster  # None: one node
        self._insert_settings = {**INSERT_SETTINGS, **async_insert_settings(async_insert_ms)}

    @classmethod
    async def connect(
        cls, url: str, cluster: migrations.Cluster | None = None, async_insert_ms: int = 0
    ) -> "ClickHouseWarehouse":
        import clickhouse_connect

        client = await clickhouse_connect.get_async_client(dsn=url, settings=DISTRIBUTED_SETTINGS)
        return cls(client, cluster, async_insert_ms)

    @classmethod
    async def open(cls, settings: Settings) -> "ClickHouseWarehouse":
        """CLICKHOUSE_URL's warehouse; on a cluster, with a warehouse on each of REWARDS_CLICKHOUSE_NODES (a node's
        URL without a database gets CLICKHOUSE_URL's)."""
        if not settings.clickhouse_cluster:
            return await cls.connect(settings.clickhouse_url)
        layout = Layout(settings.clickhouse_cluster, settings.clickhouse_replicated)
        nodes = [await cls.connect(_with_database(url, settings.clickhouse_url)) for url in settings.clickhouse_nodes]
        return await cls.connect(settings.clickhouse_url, migrations.Cluster(layout, nodes))

    async def migrate(self) -> None:
        await migrations.migrate(self)

    async def command(self, sql: str) -> None:
        await self._client.command(sql)

    async def insert(self, table: str, rows: list[dict], dedup_token: str) -> None:
        if not rows:
            return
        body = orjson.dumps(rows)  # JSONEachRow reads a JSON array of rows too: one call instead of one per row
        settings = {**self._insert_settings, "insert_deduplication_token": dedup_token}
        await self._client.raw_insert(table, insert_block=body, settings=settings, fmt="JSONEachRow")

    async def insert_file(self, table: str, data: BinaryIO, fmt: str, compression: str | None = None) -> None:
        """Stream a file of rows in one of ClickHouse's formats (`Native`, …; compressed by `compression`, `zstd`…)
        into `table`, as one insert (no deduplication: a file is sent once), its rows as they are (not merged on
        insert by a Summing or Replacing engine: a copy keeps its source's rows)."""
        settings = {"insert_deduplicate": 0, "optimize_on_insert": 0}
        await self._client.raw_insert(table, insert_block=data, settings=settings, fmt=fmt, compression=compression)

    async def query(self, sql: str, params: dict | None = None) -> list[dict]:
        # clickhouse-connect escapes the values itself (server-side binding): they must not be escaped before.
        params = {name: param_value(value) for name, value in params.items()} if params else None
        result = await self._client.raw_query(sql, parameters=params, fmt="JSON")
        return orjson.loads(result)["data"] if result else []

    async def close(self) -> None:
        await self._client.close()
        for node in self.cluster.nodes if self.cluster is not None else ():
            await node.close()


def _with_database(node_url: str, warehouse_url: str) -> str:
    node = urlsplit(node_url)
    if node.path.strip("/"):
        return node_url
    return urlunsplit(node._replace(path=urlsplit(warehouse_url).path))
