"""Moving an embedded warehouse onto a ClickHouse server (runtime.moving.warehouse.copy_warehouse):
every table arrives with exactly its rows (the aggregates too, not counted again by the server's views), and a move
into a server that holds rows, or is at another migration, is refused before anything is copied."""

import uuid

import pytest

from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from runtime.moving import MoveRefused
from runtime.moving.warehouse import copy_warehouse
from tests.support.warehouses import migrated_warehouse

_PAYOUTS = """
INSERT INTO payouts (project_id, payout_id, source_id, source_type, kind, role, level, recipient_identifier,
                     recipient_identifier_type, amount, currency, currency_chain_id, currency_name, currency_decimals,
                     happened_at, created_at)
SELECT 'moved', concat({batch:String}, toString(number)), toString(number), 'conversion', 'end_user_reward',
       'end_user', 0,
       concat('0x', leftPad(lower(hex(number % 50)), 40, '0')), 'evm_address',
       toDecimal256('1234567890123456789.123456789012345678', 18) + number, 'point', 0, 'POINT', 0,
       now64(3) - number, now64(3)
FROM numbers(3000)
"""
_CHECKSUM = "SELECT count() AS n, toString(groupBitXor(cityHash64(*))) AS h FROM {table}"


async def _tables(warehouse) -> list[str]:
    rows = await warehouse.query(
        "SELECT name FROM system.tables WHERE database = currentDatabase() AND engine LIKE '%MergeTree'"
        " AND name NOT IN ('schema_migrations', 'worker_plans') ORDER BY name"
    )
    return [row["name"] for row in rows]


async def _checksums(warehouse) -> dict[str, dict]:
    return {table: (await warehouse.query(_CHECKSUM.format(table=table)))[0] for table in await _tables(warehouse)}


@pytest.fixture
async def source(tmp_path):
    warehouse = ChdbWarehouse(tmp_path / "embedded")
    await warehouse.migrate()
    for batch in ("a", "b"):  # two inserts: the aggregates hold two rows of each user (two parts), kept as they are
        await warehouse.command(_PAYOUTS.replace("{batch:String}", f"'{batch}'"))
    yield warehouse
    await warehouse.close()


async def test_every_table_arrives_with_exactly_its_rows(source, request, tmp_path):
    target = await migrated_warehouse("clickhouse", request, tmp_path / "unused", "moving")
    try:
        moved = await copy_warehouse(source, target, tmp_path)
        expected = await _checksums(source)
        assert await _checksums(target) == expected
        assert moved["payouts"] == 6000 and int(expected["point_totals_by_user"]["n"]) == 100  # 50 users, 2 parts
        totals = "SELECT toString(sum(amount)) AS s FROM point_totals_by_user WHERE project_id = 'moved'"
        assert await target.query(totals) == await source.query(totals)  # not counted again by the server's views
        with pytest.raises(MoveRefused, match="must be empty"):
            await copy_warehouse(source, target, tmp_path)
    finally:
        await target.close()


async def test_a_server_at_another_migration_is_refused(source, request, tmp_path):
    target = await migrated_warehouse("clickhouse", request, tmp_path / "unused", f"moving_{uuid.uuid4().hex[:4]}")
    try:
        await target.command("ALTER TABLE schema_migrations DELETE WHERE version = 18 SETTINGS mutations_sync = 2")
        with pytest.raises(MoveRefused, match="migrations"):
            await copy_warehouse(source, target, tmp_path)
        assert int((await target.query("SELECT count() AS n FROM payouts"))[0]["n"]) == 0
    finally:
        await target.close()
