"""The warehouse's part of a move (runtime.moving): every table of the embedded chdb warehouse copied into a
ClickHouse server migrated to the same version, whose tables are empty. Each table is written by chdb into a file in
ClickHouse's Native format (its own columns and types, no text conversion: exact decimals and UInt128 keys as they
are), sent to the server into a twin of the table (`CREATE TABLE t__moving AS t`), then swapped in (`ALTER TABLE t
REPLACE PARTITION tuple() FROM t__moving`): a view reading `t` never fires, so each aggregate table gets exactly the
embedded one's rows (they are copied too), not a second count of them. Memory stays bounded by the file's streaming,
whatever the table's size.
"""

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
SELECT name, engine FROM system.tables
WHERE database = currentDatabase() AND engine LIKE '%MergeTree' AND NOT endsWith(name, '__erasing')
  AND NOT endsWith(name, {twin:String})
ORDER BY name
"""
_ENGINES = "SELECT name, engine FROM system.tables WHERE database = currentDatabase()"


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
            await _copy_table(source, target, table, rows, folder / f"{table}.native")
        copied[table] = rows
        if progress is not None:
            progress(table, rows)
    return copied


async def check(source: ChdbWarehouse, target: ClickHouseWarehouse) -> list[str]:
    """The tables to copy, once the server is found able to take them: one node, the same migration, the same
    engines (a cluster's Distributed or Replicated tables are not a target: the twin's insert would reach every shard
    and fire their views), empty (the workers' plans too: an old plan would cut the new topic's deliveries)."""
    if target.cluster is not None:
        raise MoveRefused("moving into a sharded warehouse is not supported: move into one node")
    here, there = (await migrations.read_state(source)).version, (await migrations.read_state(target)).version
    if here != there:
        raise MoveRefused(f"the warehouses are at migrations {here} (embedded) and {there} (server): run `rewards "
                          "migrate` with CLICKHOUSE_URL set first")  # fmt: skip
    found = {row["name"]: row["engine"] for row in await source.query(_TABLES, {"twin": TWIN})}
    tables = [table for table in found if table not in SKIPPED]
    engines = {row["name"]: row["engine"] for row in await target.query(_ENGINES)}
    other = [f"{table} ({engines.get(table)})" for table in tables if engines.get(table) != found[table]]
    if other:
        raise MoveRefused(f"the server's tables are not the embedded ones' engines: {', '.join(other)} (a cluster's "
                          "node is not a target: move into one ClickHouse server)")  # fmt: skip
    held = [table for table in [*tables, "worker_plans"] if await _rows(target, table)]
    if held:
        raise MoveRefused(f"the server's tables must be empty; these hold rows: {', '.join(held)}")
    return tables


async def _rows(warehouse, table: str) -> int:
    return int((await warehouse.query(f"SELECT count() AS n FROM {table}"))[0]["n"])


def _literal(path: Path) -> str:
    """A path as a ClickHouse string literal (INTO OUTFILE takes a literal, not a parameter)."""
    return "'" + str(path).replace("\\", "\\\\").replace("'", "\\'") + "'"


async def _copy_table(source: ChdbWarehouse, target: ClickHouseWarehouse, table: str, sent: int, path: Path) -> None:
    path.unlink(missing_ok=True)
    # zstd: the file takes about the table's own size on disk, not its uncompressed size
    await source.command(f"SELECT * FROM {table} INTO OUTFILE {_literal(path)} COMPRESSION 'zstd' FORMAT Native")
    twin = table + TWIN
    try:
        await target.command(f"DROP TABLE IF EXISTS {twin}")
        await target.command(f"CREATE TABLE {twin} AS {table}")
        with path.open("rb") as native:
            await target.insert_file(twin, native, "Native", compression="zstd")
        if (arrived := await _rows(target, twin)) != sent:
            raise MoveRefused(f"{table}: {arrived} rows arrived of {sent}; nothing of it was swapped in")
        await target.command(f"ALTER TABLE {table} REPLACE PARTITION tuple() FROM {twin}")
    finally:
        await target.command(f"DROP TABLE IF EXISTS {twin}")
        path.unlink(missing_ok=True)
