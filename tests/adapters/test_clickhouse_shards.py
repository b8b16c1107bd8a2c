"""The warehouse sharded over a ClickHouse cluster (schemas/clickhouse/layout.py, run by
rewards/adapters/migrations.py).

Without an engine: the rewriting of each statement form, and a review of the replicated layout's DDL of every
migration (Replicated engines, ON CLUSTER, views on `_local` tables, Distributed tables sharded by project), which
cannot run on these machines (../shared/ENGINES.md, "Clusters on one machine").

Marked `cluster` (a 2-shard cluster, tests/support/clickhouse_cluster.py): the migrations on every node; the workers'
writes (stream_workers.processor, as tests/schemas/test_migrations.py writes them) on the shard of their project and
read by the query API's own SQL as on one node, given the same rows; a redelivered delivery written once; the
backfill, EXCHANGE and down steps shard by shard; and the replicated DDL accepted by ClickHouse's parser.
"""

import json
import re
import uuid
from dataclasses import replace
from datetime import date

import pytest
from typer.testing import CliRunner

from ingest_api.claim_checks import expiry
from query_api.affiliates import service as affiliate_queries
from query_api.claim_checks import service as check_queries
from query_api.leaderboards import payout_boards_service
from query_api.payouts import service as payout_queries
from rewards.adapters import dedup_archive, migrations
from rewards.adapters.affiliate_figures import all_time_figures
from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse
from rewards.cli import app
from rewards.devengines.clickhouse import connect
from rewards.domain import claim_checks
from rewards.domain.payouts import User
from rewards.ports import Delivery
from runtime.wiring import open_embedded_state
from schemas import clickhouse as schema
from schemas.clickhouse.layout import LOCAL, Layout, LayoutError, Placed
from schemas.records import decode_message
from stream_workers import processor
from tests.schemas.test_migrations import (
    AFTER,
    ALICE,
    ALL,
    BOB,
    CAROL,
    NEXT,
    SHIPPED,
    T0,
    WRITTEN_BEFORE,
    by_kind,
    conversion,
    deliver,
    figures,
    migrations_dir,
    populate,
    raw_by_kind,
    usd,
)

SHARDED, REPLICATED = Layout("rewards"), Layout("rewards", replicated=True)
PATH = "'/clickhouse/tables/{uuid}/{shard}', '{replica}'"


def declared(*extra: str) -> list[str]:
    """Every statement the runner knows (the migrations' up and down, the log's table) and `extra`."""
    texts = [migrations._LOG_DDL, *extra]
    return texts + [s for m in schema.load_migrations() for s in (*m.up, *(m.down or ()))]


TOTALS = """CREATE TABLE IF NOT EXISTS totals
(
    project_id String,
    note String DEFAULT 'a, (b',
    amount Decimal(76, 18)
)
ENGINE = SummingMergeTree
ORDER BY project_id
SETTINGS non_replicated_deduplication_window = 100000"""
TABLES = SHARDED.tables(declared(TOTALS))


def place(layout: Layout, statement: str) -> list[tuple[str, bool]]:
    return [(p.sql, p.each_node) for p in layout.place(statement, TABLES)]


def distributed(name: str, column: str = "project_id", on: str = "", create: str = "CREATE TABLE IF NOT EXISTS") -> str:
    engine = f"Distributed('rewards', currentDatabase(), '{name}_local', cityHash64({column}))"
    return f"{create} {name}{on} AS {name}_local ENGINE = {engine}"


# -- the rewriting, form by form -------------------------------------------------------------------------------


def test_one_node_runs_every_statement_as_declared():
    one_node = Layout()
    assert one_node.tables(declared()) == {}
    for statement in declared():
        assert one_node.place(statement, {}) == [Placed(statement)]


def test_a_table_becomes_a_local_table_on_each_node_and_a_distributed_one():
    local = TOTALS.replace("totals\n(", "totals_local (")
    assert place(SHARDED, TOTALS) == [(local, True), (distributed("totals"), True)]
    assert TABLES["totals"] == "project_id"  # the literal's comma and parenthesis are not columns


def test_a_table_without_project_id_is_sharded_by_its_sorting_key():
    assert TABLES["worker_plans"] == "plan_key" and TABLES[migrations.TABLE] == "version"
    assert place(SHARDED, declared()[0])[1] == (distributed(migrations.TABLE, "version"), True)
    nothing = "CREATE TABLE t (a String, b UInt8) ENGINE = MergeTree ORDER BY tuple()"
    with pytest.raises(LayoutError, match="no project_id and no sorting key"):
        SHARDED.tables([nothing])


def test_a_view_reads_and_writes_the_shards_own_tables():
    view = (
        "CREATE MATERIALIZED VIEW IF NOT EXISTS totals_mv TO totals AS\n"
        "SELECT p.project_id, p.amount FROM payouts AS p JOIN (SELECT project_id FROM referrals) AS r USING project_id"
        " WHERE p.currency = 'FROM payouts' AND p.kind IN (SELECT kind FROM system.one)"
    )
    assert place(SHARDED, view) == [(
        "CREATE MATERIALIZED VIEW IF NOT EXISTS totals_mv TO totals_local AS SELECT p.project_id, p.amount"
        " FROM payouts_local AS p JOIN (SELECT project_id FROM referrals_local) AS r USING project_id"
        " WHERE p.currency = 'FROM payouts' AND p.kind IN (SELECT kind FROM system.one)", True)]  # fmt: skip
    assert place(REPLICATED, view)[0][0].startswith(
        "CREATE MATERIALIZED VIEW IF NOT EXISTS totals_mv ON CLUSTER rewards TO totals_local AS"
    )


@pytest.mark.parametrize(
    ("statement", "error"),
    [("CREATE MATERIALIZED VIEW v ENGINE = MergeTree ORDER BY a AS SELECT a FROM payouts", "no sharded form"),
     ("CREATE MATERIALIZED VIEW v TO elsewhere AS SELECT project_id FROM payouts", "must be tables of the migrations"),
     ("CREATE MATERIALIZED VIEW v TO totals AS SELECT plan_key AS project_id FROM worker_plans", "sharded by"),
     ("INSERT INTO totals SELECT plan_key, '', 0 FROM worker_plans", "on the wrong shards"),
     ("ALTER TABLE elsewhere ADD COLUMN a String", "not a table the migrations create"),
     ("TRUNCATE TABLE elsewhere", "not a table the migrations create"),
     ("OPTIMIZE TABLE payouts FINAL", "no sharded form"),
     ("RENAME TABLE payouts TO payouts_old", "no sharded form"),
     ("CREATE TABLE t AS payouts", "no sharded form")],
)  # fmt: skip
def test_what_cannot_be_sharded_as_declared_is_refused(statement, error):
    with pytest.raises(LayoutError, match=error):
        SHARDED.place(statement, TABLES)


def test_alter_changes_the_local_table_and_the_distributed_ones_columns():
    add = "ALTER TABLE referrals ADD COLUMN IF NOT EXISTS use_id String DEFAULT ''"
    assert place(SHARDED, add) == [(add.replace("referrals", "referrals_local"), True), (add, True)]
    ttl = "ALTER TABLE dedup_ids MODIFY TTL toDateTime(accepted_at) + INTERVAL 40 DAY"
    assert place(SHARDED, ttl) == [(ttl.replace("dedup_ids", "dedup_ids_local"), True)]  # data only: the local
    both = "ALTER TABLE payouts ADD COLUMN note String DEFAULT 'a, b', MODIFY SETTING index_granularity = 256"
    assert place(REPLICATED, both) == [
        ("ALTER TABLE payouts_local ON CLUSTER rewards ADD COLUMN note String DEFAULT 'a, b', MODIFY SETTING "
         "index_granularity = 256", False),
        ("ALTER TABLE payouts ON CLUSTER rewards ADD COLUMN note String DEFAULT 'a, b'", False)]  # fmt: skip


def test_a_backfill_copies_each_shards_own_rows():
    backfill = (
        "INSERT INTO dedup_ids SETTINGS insert_deduplicate = 0\n"
        "SELECT project_id, 'event FROM x', dedup_id FROM conversions"
    )
    assert place(SHARDED, backfill) == [(
        "INSERT INTO dedup_ids_local SETTINGS insert_deduplicate = 0\n"
        "SELECT project_id, 'event FROM x', dedup_id FROM conversions_local", True)]  # fmt: skip
    assert place(REPLICATED, backfill) == [(
        "INSERT INTO dedup_ids SETTINGS parallel_distributed_insert_select = 2, insert_deduplicate = 0\n"
        "SELECT project_id, 'event FROM x', dedup_id FROM conversions", False)]  # fmt: skip
    plain = "INSERT INTO totals (project_id, amount)\nSELECT project_id, amount FROM payouts"
    assert place(REPLICATED, plain) == [(
        "INSERT INTO totals (project_id, amount) SETTINGS parallel_distributed_insert_select = 2\n"
        "SELECT project_id, amount FROM payouts", False)]  # fmt: skip
    values = "INSERT INTO totals (project_id, amount) VALUES ('p', 1)"
    assert place(SHARDED, values) == [(values, False)]  # once, through the Distributed table


def test_truncate_exchange_and_drop_act_on_the_local_tables():
    assert place(SHARDED, "TRUNCATE TABLE dedup_ids") == [("TRUNCATE TABLE dedup_ids_local", True)]
    assert place(REPLICATED, "TRUNCATE TABLE IF EXISTS dedup_ids") == [
        ("TRUNCATE TABLE IF EXISTS dedup_ids_local ON CLUSTER rewards", False)]  # fmt: skip
    assert place(SHARDED, "EXCHANGE TABLES dedup_ids AND dedup_ids_next") == [
        ("EXCHANGE TABLES dedup_ids_local AND dedup_ids_next_local", True),
        (distributed("dedup_ids", create="CREATE OR REPLACE TABLE"), True),
        (distributed("dedup_ids_next", create="CREATE OR REPLACE TABLE"), True)]  # fmt: skip
    assert place(SHARDED, "DROP TABLE dedup_ids_next") == [
        ("DROP TABLE dedup_ids_next", True), ("DROP TABLE dedup_ids_next_local", True)]  # fmt: skip
    assert place(REPLICATED, "DROP VIEW IF EXISTS totals_mv") == [
        ("DROP VIEW IF EXISTS totals_mv ON CLUSTER rewards", False)
    ]
    assert place(SHARDED, "SELECT throwIf(1, 'FROM payouts')") == [("SELECT throwIf(1, 'FROM payouts')", False)]


@pytest.mark.parametrize(
    ("engine", "replicated"),
    [("MergeTree", f"ReplicatedMergeTree({PATH})"), ("MergeTree()", f"ReplicatedMergeTree({PATH})"),
     ("ReplacingMergeTree(version)", f"ReplicatedReplacingMergeTree({PATH}, version)"),
     ("SummingMergeTree", f"ReplicatedSummingMergeTree({PATH})"),
     ("SummingMergeTree((amount, payouts))", f"ReplicatedSummingMergeTree({PATH}, (amount, payouts))"),
     ("AggregatingMergeTree", f"ReplicatedAggregatingMergeTree({PATH})")],
)  # fmt: skip
def test_replicated_engines(engine, replicated):
    statement = f"CREATE TABLE t (project_id String, version UInt32) ENGINE = {engine} ORDER BY project_id"
    local = place(REPLICATED, statement)[0][0]
    columns = "(project_id String, version UInt32)"
    assert local == f"CREATE TABLE t_local ON CLUSTER rewards {columns}\nENGINE = {replicated} ORDER BY project_id"


def test_bad_layouts_are_refused():
    with pytest.raises(LayoutError, match="plain identifier"):
        Layout("rewards; DROP TABLE payouts")
    with pytest.raises(LayoutError, match="needs a cluster"):
        Layout(None, replicated=True)
    with pytest.raises(LayoutError, match="no replicated form of the engine Memory"):
        REPLICATED.place("CREATE TABLE t (project_id String) ENGINE = Memory", TABLES)


# -- the replicated layout's DDL of every migration, reviewed -------------------------------------------------

ON_CLUSTER = re.compile(
    r"^(?:CREATE (?:OR REPLACE )?(?:TABLE|MATERIALIZED VIEW) (?:IF NOT EXISTS )?\w+|ALTER TABLE \w+"
    r"|TRUNCATE TABLE (?:IF EXISTS )?\w+|DROP (?:TABLE|VIEW) (?:IF EXISTS )?\w+|EXCHANGE TABLES \w+ AND \w+)"
    r" ON CLUSTER rewards\b"
)
ENGINE = re.compile(r"\bENGINE\s*=\s*(\w+)(?:\((.*?)\))?\s*\n", re.DOTALL)
CREATE_TABLE = re.compile(r"^CREATE TABLE (?:IF NOT EXISTS )?(\w+)\s*\(", re.DOTALL)
VIEW = re.compile(r"^CREATE MATERIALIZED VIEW (?:IF NOT EXISTS )?(\w+) ON CLUSTER rewards TO (\w+) AS (.*)$", re.DOTALL)
READS = re.compile(r"\b(?:FROM|JOIN)\s+(\w+)\b(?!\s*[.(])")


def test_the_replicated_ddl_of_every_migration():
    """Every declared table: a Replicated form of its engine and its deduplication window, and a Distributed table
    by project; every view on `_local` tables; every DDL statement ON CLUSTER, and every one run once."""
    statements = [migrations._LOG_DDL, *(s for m in schema.load_migrations() for s in (*m.up, *(m.down or ())))]
    tables = REPLICATED.tables(statements)
    reviewed = {"tables": 0, "views": 0}
    for statement in statements:
        generated = REPLICATED.place(statement, tables)
        assert not any(p.each_node for p in generated)
        for placed in generated:
            assert placed.sql.startswith(("INSERT", "SELECT")) or ON_CLUSTER.match(placed.sql), placed.sql
        if table := CREATE_TABLE.match(statement):
            name = table[1]
            declared_engine, declared_args = ENGINE.search(statement).groups()
            local, dist = (p.sql for p in generated)
            assert local.startswith(
                f"CREATE TABLE {'IF NOT EXISTS ' if 'IF NOT' in statement else ''}{name}_local ON CLUSTER rewards ("
            )
            args = PATH + (f", {declared_args}" if declared_args else "")
            assert f"ENGINE = Replicated{declared_engine}({args})\n" in local
            window = re.search(r"non_replicated_deduplication_window = (\d+)", statement)
            assert "non_replicated" not in local
            assert not window or f"SETTINGS replicated_deduplication_window = {window[1]}" in local
            column = {"worker_plans": "plan_key", migrations.TABLE: "version"}.get(name, "project_id")
            on = " ON CLUSTER rewards"
            assert dist == distributed(
                name, column, on, "CREATE TABLE IF NOT EXISTS" if "IF NOT" in statement else "CREATE TABLE"
            )
            reviewed["tables"] += 1
        if statement.startswith("CREATE MATERIALIZED VIEW"):
            (view,) = generated
            _, target, select = VIEW.match(view.sql).groups()
            assert target.endswith(LOCAL) and target[: -len(LOCAL)] in tables
            assert all(name.endswith(LOCAL) for name in READS.findall(select))
            assert "deduplication_window" in next(s for s in statements if CREATE_TABLE.match(s) and
                                                  CREATE_TABLE.match(s)[1] == target[: -len(LOCAL)])  # fmt: skip
            reviewed["views"] += 1
        if statement.startswith("INSERT") and READS.search(statement):
            (insert,) = generated
            assert "SETTINGS parallel_distributed_insert_select = 2" in insert.sql
    # 17 tables of 001-004, 005's (up and down), 006's 3, 007's 2, 008's 3, 009's 3, 010's 1, 011's 5 and the log's;
    # 012 makes no table and 11 views anew, up and down; 013 a table and a view
    assert reviewed == {"tables": 44, "views": 93}


# -- on a 2-shard cluster --------------------------------------------------------------------------------------


class Both:
    """The Warehouse port writing every insert to two warehouses (a cluster, one node) under the same token, and
    reading from the first: the workers write the same rows to both."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    async def insert(self, table: str, rows: list[dict], dedup_token: str) -> None:
        await self.first.insert(table, rows, dedup_token)
        await self.second.insert(table, rows, dedup_token)

    async def query(self, sql: str, params: dict | None = None) -> list[dict]:
        return await self.first.query(sql, params)


class DiesAt:
    """The Warehouse port of a worker that dies when it comes to insert into `table`."""

    def __init__(self, inner, table: str):
        self.inner, self.table = inner, table

    async def insert(self, table: str, rows: list[dict], dedup_token: str) -> None:
        if table == self.table:
            raise ConnectionError("the worker died")
        await self.inner.insert(table, rows, dedup_token)

    async def query(self, sql: str, params: dict | None = None) -> list[dict]:
        return await self.inner.query(sql, params)


@pytest.fixture
async def sharded(cluster_settings):
    warehouse = await ClickHouseWarehouse.open(cluster_settings)
    yield warehouse
    await warehouse.close()


@pytest.fixture
async def one_node(tmp_path):
    warehouse = ChdbWarehouse(tmp_path / "one_node")
    await warehouse.migrate()
    yield warehouse
    await warehouse.close()


@pytest.fixture
async def state(tmp_path):
    state = open_embedded_state(tmp_path / "state")
    yield state
    await state.close()


async def node_query(warehouse, sql: str, params: dict | None = None) -> list[list[dict]]:
    """`sql` on each node of the warehouse's cluster."""
    return [await node.query(sql, params) for node in warehouse.cluster.nodes]


async def projects_by_node(warehouse, table: str = "payouts") -> list[set[str]]:
    rows = await node_query(warehouse, f"SELECT DISTINCT project_id FROM {table}{LOCAL}")
    return [{row["project_id"] for row in node} for node in rows]


async def populate_both_shards(state, warehouse) -> list[str]:
    """populate()'s projects until each shard has one (a project's shard follows from its random id)."""
    projects = []
    for _ in range(20):  # each project misses a given shard half the time: 20 misses in a row are 1 in a million
        projects.append(await populate(state, warehouse))
        if all(await projects_by_node(warehouse.first if isinstance(warehouse, Both) else warehouse)):
            return projects
    raise AssertionError("20 projects on one shard")


async def claim_every_check(state, warehouse, project: str) -> None:
    """Each user closes and claims their claim checks (their history)."""
    rows = await warehouse.query(
        "SELECT id, user_identifier_type AS t, user_identifier AS u FROM claim_checks FINAL"
        " WHERE project_id = {p:String}",
        {"p": project},
    )
    by_user: dict[User, list[str]] = {}
    for row in rows:
        by_user.setdefault(User(row["u"], row["t"]), []).append(row["id"])
    records = []
    for number, (user, ids) in enumerate(sorted(by_user.items(), key=lambda item: item[0].identifier)):
        async with state.update_claim_checks(project, ids, claim_checks.close, user) as closed:
            records += decode_message(closed.payload)
        tx_hash = f"0x{number:064x}"
        async with state.update_claim_checks(
            project, ids, lambda c, h=tx_hash: claim_checks.claim(c, h, T0), None
        ) as claimed:
            records += decode_message(claimed.payload)
    await deliver(state, warehouse, project, *records)


async def answers(warehouse, project: str) -> dict:
    """What the query API answers about the project, through its own SQL."""
    code = (await warehouse.query(
        "SELECT code FROM referral_codes WHERE project_id = {p:String} AND owner_identifier = {o:String}",
        {"p": project, "o": ALICE.identifier}))[0]["code"]  # fmt: skip
    listing = affiliate_queries.Listing(sort_by="total_volume", descending=True, filters={}, tiers=None,
                                        default_tier=None, search=None, days=None, offset=0, limit=10)  # fmt: skip
    window = (date(2026, 9, 20), date(2026, 9, 22))
    result = {
        "total": await payout_queries.project_total(warehouse, project),
        "alice": await payout_queries.user_totals(warehouse, project, ALICE),
        "figures": await all_time_figures(warehouse, project, ALICE),
        "listing": await affiliate_queries.list_affiliates(warehouse, project, listing),
        "search": await affiliate_queries.list_affiliates(warehouse, project, replace(listing, search=code[1:5])),
        "window": await affiliate_queries.list_affiliates(warehouse, project, replace(listing, days=window)),
        "written": await dedup_archive.written_among(warehouse, project, WRITTEN_BEFORE, 35 * 86400),
        "checks": await check_queries.project_checks(warehouse, project, check_queries.ChecksFilter(), 0, 50),
    }
    for role in ("affiliate", "user"):
        for window_ms in ((None, None), (T0 + 1_800_000, T0 + 3 * 3_600_000 + 60_000)):
            key = f"leaderboard {role} {window_ms}"
            result[key] = await payout_boards_service.leaderboard(warehouse, project, role, window_ms, 0, 10, None)
        result[f"rank of bob {role}"] = await payout_boards_service.leaderboard(
            warehouse, project, role, (None, None), 0, 10, BOB
        )
    for user in (ALICE, BOB, CAROL):
        result[f"history {user}"] = await check_queries.claim_history(warehouse, project, user, 0, 10)
        result[f"check totals {user}"] = await check_queries.totals(warehouse, project, user, None)
    return result


@pytest.mark.cluster
async def test_the_migrations_make_every_table_on_every_node(sharded, cluster_settings):
    run = await migrations.migrate(sharded)
    assert run.summary() == {"version": SHIPPED, "adopted": [], "applied": ALL, "reverted": []}
    tables = SHARDED.tables(declared()).keys() - {"dedup_ids_next"}
    views = {re.match(r"CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+)", s)[1] for s in schema.statements()
             if s.startswith("CREATE MATERIALIZED VIEW")}  # fmt: skip
    expected = {name: "Distributed" for name in tables} | {name: "MaterializedView" for name in views}
    for node in await node_query(sharded, "SELECT name, engine FROM system.tables WHERE database = currentDatabase()"):
        engines = {row["name"]: row["engine"] for row in node}
        assert {name: engine for name, engine in engines.items() if not name.endswith(LOCAL)} == expected
        assert engines["claim_checks_local"] == "ReplacingMergeTree" and engines["payouts_local"] == "MergeTree"
        assert {name for name in engines if name.endswith(LOCAL)} == {f"{name}{LOCAL}" for name in tables}
    status = await migrations.status(sharded)
    assert (status["version"], status["pending"], status["problems"]) == (SHIPPED, [], [])
    assert (await migrations.migrate(sharded)).steps == []

    one_node = await ClickHouseWarehouse.connect(cluster_settings.clickhouse_url)  # the cluster forgotten
    try:
        with pytest.raises(migrations.MigrationError, match="sharded over a cluster"):
            await migrations.migrate(one_node)
    finally:
        await one_node.close()
    first_only = cluster_settings.model_copy(update={"clickhouse_nodes": cluster_settings.clickhouse_nodes[:1]})
    partial = await ClickHouseWarehouse.open(first_only)
    try:
        with pytest.raises(migrations.MigrationError, match="leave out shard 2 replica 1 of cluster"):
            await migrations.migrate(partial)
    finally:
        await partial.close()


@pytest.mark.cluster
def test_rewards_migrate_makes_the_sharded_warehouse(cluster_settings, kafka_url, redis_url):
    """`rewards migrate` of the production shape, the cluster named in its environment (nodes without a database
    get CLICKHOUSE_URL's)."""
    env = {"CLICKHOUSE_URL": cluster_settings.clickhouse_url, "REWARDS_CLICKHOUSE_URL": None,
           "REWARDS_CLICKHOUSE_CLUSTER": cluster_settings.clickhouse_cluster,
           "REWARDS_CLICKHOUSE_NODES": ",".join(url.rsplit("/", 1)[0] for url in cluster_settings.clickhouse_nodes),
           "KAFKA_BOOTSTRAP_SERVERS": kafka_url, "REDIS_URL": redis_url}  # fmt: skip
    first = CliRunner().invoke(app, ["migrate"], env=env)
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["migrations"]["applied"] == ALL
    for url in cluster_settings.clickhouse_nodes:
        node = connect(url.rsplit("/", 1)[0])
        engines = node.query(
            "SELECT name, engine FROM system.tables WHERE database = {d:String} AND name LIKE 'payouts%'",
            parameters={"d": url.rsplit("/", 1)[1]},
        ).result_rows
        node.close()
        assert sorted(engines) == [("payouts", "Distributed"), ("payouts_local", "MergeTree")]
    second = CliRunner().invoke(app, ["migrate"], env=env)
    assert second.exit_code == 0 and json.loads(second.stdout)["migrations"]["applied"] == []


@pytest.mark.cluster
async def test_each_project_lives_on_one_shard_and_reads_as_on_one_node(sharded, one_node, state):
    await migrations.migrate(sharded)
    both = Both(sharded, one_node)
    projects = await populate_both_shards(state, both)
    for project in projects:
        await claim_every_check(state, both, project)

    on_nodes = await projects_by_node(sharded)
    assert all(on_nodes) and set.union(*on_nodes) == set(projects) and not set.intersection(*on_nodes)
    for table in ("conversions", "claim_checks", "dedup_ids", "point_totals_by_project", "affiliate_listing"):
        assert await projects_by_node(sharded, table) == on_nodes  # written, or by the views, on the project's shard
    for project in projects:
        assert await figures(sharded, project) == await figures(one_node, project)
        on_cluster, alone = await answers(sharded, project), await answers(one_node, project)
        assert on_cluster == alone
        assert on_cluster["total"] > 0 and on_cluster["listing"][0] and on_cluster["search"][0]
        assert len(on_cluster["written"]) == 4 and on_cluster[f"history {CAROL}"][0]
    due = {"now": "2299-01-01 00:00:00.000", "limit": 10}  # the expiry sweep's read (its IN runs shard by shard)
    assert await sharded.query(expiry.DUE, due) == await one_node.query(expiry.DUE, due) == []


@pytest.mark.cluster
async def test_a_delivery_written_again_counts_once_on_every_shard(sharded, state):
    await migrations.migrate(sharded)
    projects = await populate_both_shards(state, sharded)
    on_nodes = await projects_by_node(sharded)
    first, second = on_nodes[0].pop(), on_nodes[1].pop()
    records = [conversion(p, f"again-{p}", BOB, "purchase", 4, value=usd("80")) for p in (first, second)]
    for record in records:
        async with state.ingest(record.project_id, [record.dedup_id], [(BOB, "purchase")], None):
            pass
    before = {p: await figures(sharded, p) for p in projects}

    # One delivery of both projects: each insert splits into a block per shard. The worker dies before its last
    # insert (dedup_ids), so nothing tells the delivery was written: it comes again and is computed anew (new
    # created_at), under the same token.
    delivery = Delivery(uuid.uuid4().hex, records)
    with pytest.raises(ConnectionError):
        await processor.process_delivery(delivery, state, DiesAt(sharded, "dedup_ids"))
    written = {p: await figures(sharded, p) for p in projects}
    assert written[first] != before[first] and written[second] != before[second]  # on both shards
    assert await processor.process_delivery(delivery, state, sharded) > 0
    assert {p: await figures(sharded, p) for p in projects} == written
    for project in (first, second):
        rows = await sharded.query(
            "SELECT toString(count()) AS n FROM dedup_ids WHERE project_id = {p:String} AND dedup_id = {d:String}",
            {"p": project, "d": f"again-{project}"},
        )
        assert rows == [{"n": "1"}]


@pytest.mark.cluster
async def test_backfills_exchange_and_down_steps_run_shard_by_shard(sharded, state, tmp_path):
    later = schema.load_migrations(migrations_dir(tmp_path))  # as shipped, NEXT (a view, backfilled), AFTER (a column)
    await migrations.migrate(sharded, target=4)
    projects = await populate_both_shards(state, sharded)
    run = await migrations.migrate(sharded, migrations=later)  # 005 exchanges dedup_ids, NEXT backfills a view
    assert run.summary()["applied"] == [*ALL[4:], NEXT, AFTER]
    for project in projects:
        assert await by_kind(sharded, project) == await raw_by_kind(sharded, project) != []
        written = await dedup_archive.written_among(sharded, project, WRITTEN_BEFORE, 35 * 86400)
        assert set(written) == WRITTEN_BEFORE
    assert await projects_by_node(sharded, "payout_totals_by_kind") == await projects_by_node(sharded)
    granularity = (
        "SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = 'dedup_ids_local'"
    )
    assert all("index_granularity = 256" in node[0]["engine_full"] for node in await node_query(sharded, granularity))
    channels = await sharded.query("SELECT DISTINCT channel FROM conversions")
    assert channels == [{"channel": ""}]

    # The replicated layout's backfill (one statement, each shard copying its own rows) gives the same.
    declared_next = [s for m in later if m.version == NEXT for s in m.up]
    for statement in declared_next[2:]:  # TRUNCATE, then the INSERT ... SELECT
        for placed in REPLICATED.place(statement, SHARDED.tables(declared(*declared_next))):
            for node in sharded.cluster.nodes if placed.sql.startswith("TRUNCATE") else [sharded]:
                await node.command(placed.sql.replace(" ON CLUSTER rewards", ""))
    assert await projects_by_node(sharded, "payout_totals_by_kind") == await projects_by_node(sharded)
    for project in projects:
        assert await by_kind(sharded, project) == await raw_by_kind(sharded, project)

    run = await migrations.migrate(sharded, target=4, migrations=later)
    assert run.summary()["reverted"] == list(range(AFTER, 4, -1))
    for node in await node_query(sharded, "SELECT name FROM system.tables WHERE database = currentDatabase()"):
        names = {row["name"] for row in node}
        assert not names & {"payout_totals_by_kind", "payout_totals_by_kind_local", "dedup_ids_next_local"}
        assert "dedup_ids_local" in names
    for project in projects:
        assert set(await dedup_archive.written_among(sharded, project, WRITTEN_BEFORE, 35 * 86400)) == WRITTEN_BEFORE
    assert (await migrations.migrate(sharded, migrations=later)).summary()["applied"] == [*ALL[4:], NEXT, AFTER]


@pytest.mark.cluster
async def test_the_replicated_ddl_parses_as_clickhouse(clickhouse_cluster):
    """ClickHouse's own parser (formatQuery) reads every statement of the replicated layout."""
    client = connect(clickhouse_cluster.urls[0])
    try:
        tables = REPLICATED.tables(declared())
        for statement in declared():
            for placed in REPLICATED.place(statement, tables):
                formatted = client.query("SELECT formatQuery({q:String})", parameters={"q": placed.sql}).result_rows
                assert formatted[0][0]
    finally:
        client.close()
