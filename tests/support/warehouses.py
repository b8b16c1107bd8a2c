"""A migrated warehouse of either adapter, for tests of the Warehouse port: in-process chdb, or a ClickHouse server
in a database of its own (under CI=true, no server is a failure, not a skip)."""

import uuid
from pathlib import Path

from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse
from rewards.devengines import clickhouse
from rewards.ports import Warehouse


async def migrated_warehouse(kind: str, request, folder: Path, name: str) -> Warehouse:
    """`kind`: "chdb" (its files in `folder`) or "clickhouse" (the `clickhouse_url` fixture's server, a database named
    after `name`)."""
    if kind == "chdb":
        warehouse = ChdbWarehouse(folder)
    else:
        import clickhouse_connect

        url = request.getfixturevalue("clickhouse_url")
        database = f"{name}_{uuid.uuid4().hex[:10]}"
        admin = clickhouse.connect(url)
        admin.command(f"CREATE DATABASE {database}")
        admin.close()
        warehouse = ClickHouseWarehouse(await clickhouse_connect.get_async_client(dsn=url, database=database))
    await warehouse.migrate()
    return warehouse
