"""The warehouse's part of a move (runtime.moving): every table of the embedded chdb warehouse copied into a
ClickHouse server migrated to the same version, whose tables are empty. Each table is written by chdb into a file in
ClickHouse's Native format (its own columns and types, no text conversion: exact decimals and UInt128 keys as they
are), sent to the server into a twin of the table (`CREATE TABLE t__moving AS t`), then swapped in (`ALTER TABLE t
REPLACE PARTITION tuple() FROM t__moving`): a view reading `t` never fires, so each aggregate table gets exactly the
embedded one's rows (they are copied too), not a second count of them. Memory stays bounded by the file's streaming,
whatever the table's size.
"""

import re
from pathlib import Path

from rewards.adapters import migrations
from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse
from runtime.moving.refusals import MoveRefused

TWIN = "__moving"
# Not copied: the migrations' own log (the server keeps its own), and the workers' plans (the embedded worker's are
# for its outbox's deliveries, which no production worker reads).
SKIPPED = {migrations.TABLE, "worker_plans"}
_TABLES = """
SELECT name FROM system.tables
WHERE database = currentDatabase() AND engine LIKE '%MergeTree' AND NOT endsWith(name, '__erasing')
  AND NOT endsWith(name, {twin:String})
ORDER BY name
"""
_PLAIN_PATH = re.compile(r"^[A-Za-z0-9_./-]+$")


async def copy_warehouse(source: ChdbWarehouse, target: ClickHouseWarehouse, folder: Path, progress=None) -> dict:
    """Copy every table; {table: rows copied}. `folder`: where the tables' files are written (removed as each is
    sent). `progress(table, rows)` is called after each table."""
    return await copy_tables(source, target, await check(source, target), folder, progress)


async def copy_tables(source: ChdbWarehouse, target, tables: list[str], folder: Path, progress=None) -> dict:
    """Copy `tables` (those `check` answered)."""
    folder.mkdir(parents=True, exist_ok=True)
    copied = {}
    for table in tables:
        rows = await _rows(source, table)
        if rows:
            await _copy_table(source, target, table, folder / f"{table}.native")
        copied[table] = rows
        if progress is not None:
            progress(table, rows)
    return copied


async def check(source: ChdbWarehouse, target: ClickHouseWarehouse) -> list[str]:
    """The tables to copy, once the server is found able to take them: one node, the same migration, empty."""
    if target.cluster is not None:
        raise MoveRefused("moving into a sharded warehouse is not supported: move into one node")
    here, there = (await migrations.read_state(source)).version, (await migrations.read_state(target)).version
    if here != there:
        raise MoveRefused(f"the warehouses are at migrations {here} (embedded) and {there} (server): run `rewards "
                          "migrate` with CLICKHOUSE_URL set first")  # fmt: skip
    tables = [row["name"] for row in await source.query(_TABLES, {"twin": TWIN}) if row["name"] not in SKIPPED]
    held = [table for table in tables if await _rows(target, table)]
    if held:
        raise MoveRefused(f"the server's tables must be empty; these hold rows: {', '.join(held)}")
    return tables


async def _rows(warehouse, table: str) -> int:
    return int((await warehouse.query(f"SELECT count() AS n FROM {table}"))[0]["n"])


async def _copy_table(source: ChdbWarehouse, target: ClickHouseWarehouse, table: str, path: Path) -> None:
    if not _PLAIN_PATH.match(str(path)):  # INTO OUTFILE takes a literal, not a parameter
        raise MoveRefused(f"the folder's path must be plain (letters, digits, _ . / -): {path}")
    path.unlink(missing_ok=True)
    await source.command(f"SELECT * FROM {table} INTO OUTFILE '{path}' FORMAT Native")
    twin = table + TWIN
    try:
        await target.command(f"DROP TABLE IF EXISTS {twin}")
        await target.command(f"CREATE TABLE {twin} AS {table}")
        with path.open("rb") as native:
            await target.insert_file(twin, native, "Native")
        await target.command(f"ALTER TABLE {table} REPLACE PARTITION tuple() FROM {twin}")
    finally:
        await target.command(f"DROP TABLE IF EXISTS {twin}")
        path.unlink(missing_ok=True)
