"""schemas/clickhouse/views.py: the views the migrations leave, as the engine holds them, and the order of a delivery's
inserts that lets every view find the rows it joins (a view joining a table written at the same time wrote nothing:
the clean-clone CI at 7d1c802 found by-referrer commissions missing, `affiliate_volumes` inserted beside `payouts`)."""

import re

import pytest

from rewards.adapters import migrations
from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from schemas.clickhouse.views import View, insert_waves, reads_on_insert, views
from stream_workers.processor import LAST, TABLES, WAVES


@pytest.fixture(scope="module")
async def engine_views(tmp_path_factory) -> dict[str, dict]:
    """Every materialized view of a freshly migrated embedded warehouse: its query, and the tables it feeds from."""
    warehouse = ChdbWarehouse(tmp_path_factory.mktemp("views") / "warehouse")
    try:
        await migrations.migrate(warehouse)
        rows = await warehouse.query(
            "SELECT name, engine, as_select, dependencies_table FROM system.tables WHERE database = currentDatabase()"
        )
    finally:
        await warehouse.close()
    tables = {row["name"] for row in rows if row["engine"] != "MaterializedView"}
    found = {row["name"]: {"query": row["as_select"], "sources": set(), "tables": tables} for row in rows
             if row["engine"] == "MaterializedView"}  # fmt: skip
    for row in rows:
        for view in row["dependencies_table"]:
            found[view]["sources"].add(row["name"])
    return found


async def test_the_views_are_those_the_engine_holds_fed_by_the_same_tables(engine_views):
    made = views()
    assert set(made) == set(engine_views)
    assert {name: {view.source} for name, view in made.items()} == {n: v["sources"] for n, v in engine_views.items()}


async def test_what_each_view_reads_is_every_other_table_its_query_selects_from(engine_views):
    for name, view in views().items():
        held = engine_views[name]  # its query as the engine formats it (`FROM db.table AS v`)
        named = {table for table in held["tables"] if re.search(rf"\b(FROM|JOIN)\s+(\w+\.)?{table}\b", held["query"])}
        assert view.reads == named - {view.source, view.target}, name


def test_every_table_is_inserted_after_the_tables_its_views_read():
    every_view = views()
    assert sorted(t for wave in WAVES for t in wave) == sorted(TABLES) and WAVES[-1] == (LAST,)
    for n, wave in enumerate(WAVES[:-1]):
        before = {table for earlier in WAVES[:n] for table in earlier}
        for table in wave:
            assert reads_on_insert(table, every_view) & set(TABLES) <= before, table
    written = [table for wave in WAVES for table in wave]
    assert written.index("conversions") < written.index("payouts") < written.index("affiliate_volumes")


def test_waves_follow_the_views_of_view_targets_and_refuse_a_cycle():
    chain = {
        "a_mv": View("a_mv", "a_daily", "a", frozenset()),
        "a_daily_mv": View("a_daily_mv", "a_total", "a_daily", frozenset({"b"})),  # fed by a's view: a reads b
        "b_mv": View("b_mv", "b_total", "b", frozenset({"c"})),
    }
    assert insert_waves(["a", "b", "c", "d"], chain) == [("c", "d"), ("b",), ("a",)]
    cycle = {**chain, "c_mv": View("c_mv", "c_total", "c", frozenset({"a"}))}
    with pytest.raises(ValueError, match="cycle"):
        insert_waves(["a", "b", "c"], cycle)
