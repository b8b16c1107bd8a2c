"""Versioned ClickHouse migrations (rewards/adapters/migrations.py, schemas/clickhouse/NNN_*.sql), on both warehouse
adapters: chdb in-process, and a ClickHouse server (a database of its own per test; under CI=true no server is a
failure).

Besides the package's migrations (1 to SHIPPED), the tests use a test-only directory: those as shipped, plus NEXT (a
new materialized view with a backfill of the payouts already written) and AFTER (a new column), both with down steps.
Data is written as the workers write it (stream_workers.processor.process_delivery, on an embedded state store).
"""

import json
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewards.adapters import dedup_archive, migrations
from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse
from rewards.cli import app
from rewards.devengines import clickhouse
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import Affiliate, Delivery
from rewards.settings import Settings
from runtime.wiring import open_embedded, open_embedded_state
from schemas import clickhouse as schema
from schemas.records import ConversionRecord, decode_message
from stream_workers.processor import process_delivery
from tests.conftest import evm
from tests.ingest_api.test_claim_checks import TOKEN_CONFIG

# -- test-only migrations --------------------------------------------------------------------------------------

POINTS_BY_KIND = """\
-- Payouts per project, currency and kind: a new view, started with the payouts already written.
CREATE TABLE IF NOT EXISTS payout_totals_by_kind
(
    project_id String,
    currency String,
    kind LowCardinality(String),
    amount Decimal(76, 18),
    payouts UInt64
)
ENGINE = SummingMergeTree
ORDER BY (project_id, currency, kind)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS payout_totals_by_kind_mv TO payout_totals_by_kind AS
SELECT project_id, currency, kind, amount, toUInt64(1) AS payouts FROM payouts;

-- The backfill: emptied first, so that a retry after a failure starts it over; not deduplicated, so that a
-- retry's identical block is written.
TRUNCATE TABLE payout_totals_by_kind;
-- backfill: payout_totals_by_kind_mv

-- down
DROP VIEW IF EXISTS payout_totals_by_kind_mv;
DROP TABLE IF EXISTS payout_totals_by_kind;
"""

CHANNEL = """\
-- The channel a conversion came through ('' for those before).
ALTER TABLE conversions ADD COLUMN IF NOT EXISTS channel LowCardinality(String) DEFAULT '';
-- down
ALTER TABLE conversions DROP COLUMN IF EXISTS channel;
"""

# Every shipped migration's checksum, as warehouses recorded it when they applied it: a shipped file edited so that
# what it runs changes fails here, before a warehouse refuses it (a comment, the down section, or a backfill rewritten
# as the `-- backfill:` line that expands to it keep the checksum). A new migration adds its line.
APPLIED_CHECKSUMS = {
    1: "2d756fd1639e912d945cb6e365c402b754ebaa4b01bfb54622c3ae0f0268d1d1",
    2: "16fa4da29401ec0826bc59ce74b3c8da77cb58e71b732cc50bd1f4122932da75",
    3: "b33545e6908aab1423f6858abf1a67ee31dd689a07a45a57ee754b77ab868625",
    4: "332aa1485070e84442fe38288cf7038a8117d5bda256f2900127aa7133bf6ff2",
    5: "335fb310b028871e2495ee8e03de754c751522e0dc566833a5d7138ee06e9861",
    6: "184aec7f82a54b3bfed85e16d9169ab20e88ccc724fa9f315d8dbfefe6791862",
    7: "17957e6c175aabc156b26f67731a002933cdd059fc05d598f6ea1fb509755990",
    8: "8adbe445d83569bb57e21ad340d4aee85f2abcbfdc16f9ca790fffcf54b6dd90",
    9: "ac56c334c296ea56ae7c33e4209c72beb16396921daf90a65a0dd83c011569ad",
    10: "ae4ae85ebadfa3de374e806f34d91f6b123479ee5f2f2beac12941385cb69c91",
    11: "158c86d43d17a4c5b986835a9e9894d9e31b74a34c784f4eddd27ed680b47d98",
    12: "37061619c95673b570b25a5ba8b89311f05d4a1db3ab32c5e7e18ed5643905dc",
    13: "194f1c5c662632c93a5f8045e69647e8d4309a5d1ed22eb7aab9b5cdd06dd6d8",
    14: "844dd63a1764cb864dae13b6608b90d93fea161543061b90cff335ab94223768",
    15: "aac5a65c534262b05fc97141e53e9eab57111db59c80a840906af60a6e2c311c",
    16: "6519a28e0eb8f994ed4f8fedac441a2bc200848a955a76175b80d32331972117",
    17: "d5013c27a61e2ff57c8ffde070c59b09f7077f259f241dd7daf8e5e3f6e5ec07",
    18: "4fa5eda8e7e0f29b8cf8471df18f8342500a6c2025f121fd0836ee4b25e087c2",
}

SHIPPED = len(schema.load_migrations())  # the package's migrations are 1 to SHIPPED
NEXT, AFTER = SHIPPED + 1, SHIPPED + 2  # the test-only ones, after them
POINTS_FILE = f"{NEXT:03d}_points_by_kind.sql"
TEST_MIGRATIONS = {POINTS_FILE: POINTS_BY_KIND, f"{AFTER:03d}_conversion_channel.sql": CHANNEL}
ALL = list(range(1, SHIPPED + 1))


def package_files() -> list:
    return sorted((f for f in schema.migrations_dir().iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)


def migrations_dir(tmp_path: Path, files: dict[str, str] = TEST_MIGRATIONS) -> Path:
    """The package's migrations plus `files`."""
    directory = tmp_path / f"migrations_{uuid.uuid4().hex[:6]}"
    directory.mkdir()
    for file in package_files():
        (directory / file.name).write_text(file.read_text())
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def legacy_statements(up_to: int = 3) -> list[str]:
    """What `schemas.clickhouse.statements()` ran before migrations existed: every statement of the files, comment
    lines dropped, split on `;` (the file `up_to` and those before)."""
    result = []
    for file in package_files()[:up_to]:
        text = "\n".join(line for line in file.read_text().splitlines() if not line.lstrip().startswith("--"))
        result += [statement.strip() for statement in text.split(";") if statement.strip()]
    return result


# -- the files (no engine) -------------------------------------------------------------------------------------


def test_versions_1_to_3_are_the_statements_of_before():
    assert [(m.version, m.name) for m in schema.load_migrations()] == [
        (1, "tables"), (2, "affiliates_claims"), (3, "dead_letters"), (4, "dedup_ids"),
        (5, "dedup_ids_granules"), (6, "tracking"), (7, "code_stats"),
        (8, "leaderboards"), (9, "user_payouts"), (10, "pipeline_minutes"), (11, "affiliate_portal"),
        (12, "volume_currency"), (13, "rejected_payouts"), (14, "claim_check_expiry"),
        (15, "reversals"), (16, "claimable_by_user"),
        (17, "approvals"), (18, "capped_in")]  # fmt: skip
    assert schema.statements()[: len(legacy_statements())] == legacy_statements()
    assert all(m.down is None for m in schema.load_migrations()[:3])  # undoing them would drop every table


def test_a_down_section_splits_a_file():
    migration = schema.parse_migration("006_points_by_kind.sql", POINTS_BY_KIND)
    assert migration.version == 6 and migration.name == "points_by_kind"
    assert len(migration.up) == 4 and migration.up[-1].startswith("INSERT INTO payout_totals_by_kind")
    assert migration.down == (
        "DROP VIEW IF EXISTS payout_totals_by_kind_mv",
        "DROP TABLE IF EXISTS payout_totals_by_kind",
    )
    nothing_to_undo = schema.parse_migration("006_x.sql", "INSERT INTO t SELECT 1;\n  -- DOWN  \n-- a comment\n")
    assert nothing_to_undo.down == ()
    assert schema.parse_migration("006_x.sql", "SELECT 1; -- down the line\n-- down the line").down is None


def test_the_checksum_is_of_the_forward_statements():
    base = schema.parse_migration("005_x.sql", POINTS_BY_KIND)
    recommented = POINTS_BY_KIND.replace("-- The backfill", "-- Backfilled") + "\n-- one more comment\n"
    assert schema.parse_migration("005_x.sql", recommented).checksum == base.checksum
    assert schema.parse_migration("005_x.sql", POINTS_BY_KIND + "SELECT 1;\n").checksum == base.checksum  # down
    changed = POINTS_BY_KIND.replace("toUInt64(1) AS payouts FROM payouts;", "toUInt64(2) AS payouts FROM payouts;", 1)
    assert schema.parse_migration("005_x.sql", changed).checksum != base.checksum


def test_every_shipped_migration_keeps_the_checksum_it_was_applied_with():
    found = {m.version: m.checksum for m in schema.load_migrations()}
    changed = {v: c for v, c in found.items() if APPLIED_CHECKSUMS.get(v) != c}
    assert not changed, f"an applied migration must run as it ran (or a new one needs its line): {changed}"


BACKFILLED = """\
CREATE MATERIALIZED VIEW IF NOT EXISTS totals_mv TO totals AS
SELECT project_id, amount AS total
FROM payouts WHERE currency = 'point';
TRUNCATE TABLE totals;
-- backfill: totals_mv
  --  backfill:  totals_mv  (project_id, total)
-- down
DROP VIEW IF EXISTS totals_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS totals_mv TO totals AS
SELECT project_id, amount AS total FROM payouts;
-- backfill: totals_mv
"""


def test_a_backfill_line_inserts_its_views_query_into_the_views_target():
    query = "SELECT project_id, amount AS total\nFROM payouts WHERE currency = 'point'"
    migration = schema.parse_migration("012_x.sql", BACKFILLED)
    assert migration.up[1:] == (
        "TRUNCATE TABLE totals",
        f"INSERT INTO totals SETTINGS insert_deduplicate = 0\n{query}",
        f"INSERT INTO totals (project_id, total) SETTINGS insert_deduplicate = 0\n{query}",
    )
    assert (
        migration.down[2]
        == "INSERT INTO totals SETTINGS insert_deduplicate = 0\nSELECT project_id, amount AS total FROM payouts"
    )  # the down section's own view
    written_out = POINTS_BY_KIND.replace(
        "-- backfill: payout_totals_by_kind_mv",
        "INSERT INTO payout_totals_by_kind SETTINGS insert_deduplicate = 0\n"
        "SELECT project_id, currency, kind, amount, toUInt64(1) AS payouts FROM payouts;",
    )
    assert schema.parse_migration("012_x.sql", written_out) == schema.parse_migration("012_x.sql", POINTS_BY_KIND)


@pytest.mark.parametrize(
    ("files", "error"),
    [({"4_Bad-Name.sql": "SELECT 1"}, "NNN_name.sql"), ({f"{AFTER:03d}_gap.sql": "SELECT 1"}, "no gap"),
     ({"005_again.sql": "SELECT 1"}, "no gap"), ({f"{NEXT:03d}_empty.sql": "-- nothing\n;"}, "no statements"),
     ({f"{NEXT:03d}_twice.sql": "SELECT 1;\n-- down\nSELECT 2;\n-- down\n"}, "more than one"),
     ({f"{NEXT:03d}_nowhere.sql": "SELECT 1;\n-- backfill: nowhere_mv\n"}, "no materialized view nowhere_mv"),
     ({f"{NEXT:03d}_below.sql": "-- backfill: t_mv\nCREATE MATERIALIZED VIEW IF NOT EXISTS t_mv TO t AS SELECT 1;"},
      "no materialized view t_mv made above"),
     ({f"{NEXT:03d}_inside.sql": "CREATE MATERIALIZED VIEW t_mv TO t AS SELECT 1;\nTRUNCATE t\n-- backfill: t_mv"},
      "inside a statement"),
     ({f"{NEXT:03d}_up.sql": "CREATE MATERIALIZED VIEW t_mv TO t AS SELECT 1;\n-- down\n-- backfill: t_mv"},
      "no materialized view t_mv made above"),  # the down section backfills from its own views only
     *(({f"{NEXT:03d}_typo.sql": f"CREATE MATERIALIZED VIEW t_mv TO t AS SELECT 1;\n{line}\n"}, "malformed")
       for line in ("-- backfill: t_mv;", "-- backfill t_mv", "-- backfill: t_mv (a, b", "-- backfill: db.t_mv",
                    "-- backfill: t_mv -- the totals", "-- BACKFILL:"))],
)  # fmt: skip
def test_bad_migration_files_are_refused(tmp_path, files, error):
    with pytest.raises(schema.MigrationFileError, match=error):
        schema.load_migrations(migrations_dir(tmp_path, files))


# -- where the warehouse lives ---------------------------------------------------------------------------------


@dataclass
class Place:
    """A warehouse location of one adapter; open() may be called again once the previous one is closed."""

    kind: str
    data_dir: Path | None = None  # chdb: the warehouse is data_dir/warehouse
    url: str | None = None  # a server: CLICKHOUSE_URL with the test's database

    async def open(self):
        if self.kind == "chdb":
            return ChdbWarehouse(self.data_dir / "warehouse")
        return await ClickHouseWarehouse.connect(self.url)

    def cli_env(self) -> dict:
        if self.kind == "chdb":
            return {"CLICKHOUSE_URL": None, "REWARDS_CLICKHOUSE_URL": None, "REWARDS_DATA_DIR": str(self.data_dir)}
        return {"CLICKHOUSE_URL": self.url, "REWARDS_CLICKHOUSE_URL": None}


@pytest.fixture
def server_place(clickhouse_url):
    """A database of its own on the ClickHouse server (under CI=true, no server is a failure, not a skip)."""
    database = f"migrations_{uuid.uuid4().hex[:10]}"
    admin = clickhouse.connect(clickhouse_url)
    admin.command(f"CREATE DATABASE {database}")
    yield Place("clickhouse", url=f"{clickhouse_url.rstrip('/')}/{database}")
    admin.command(f"DROP DATABASE IF EXISTS {database}")
    admin.close()


@pytest.fixture(params=["chdb", "clickhouse"])
def place(request, tmp_path):
    if request.param == "chdb":
        return Place("chdb", data_dir=tmp_path / "data")
    return request.getfixturevalue("server_place")


@pytest.fixture
async def warehouse(place):
    warehouse = await place.open()
    yield warehouse
    await warehouse.close()


@pytest.fixture
async def state(tmp_path):
    state = open_embedded_state(tmp_path)
    yield state
    await state.close()


class Spy:
    """The Warehouse port, recording the statements run through it."""

    def __init__(self, inner):
        self.inner, self.commands = inner, []

    async def command(self, sql: str) -> None:
        self.commands.append(sql)
        await self.inner.command(sql)

    async def insert(self, table: str, rows: list[dict], dedup_token: str) -> None:
        await self.inner.insert(table, rows, dedup_token)

    async def query(self, sql: str, params: dict | None = None) -> list[dict]:
        return await self.inner.query(sql, params)


async def tables(warehouse) -> set[str]:
    rows = await warehouse.query("SELECT name FROM system.tables WHERE database = currentDatabase()")
    return {row["name"] for row in rows}


async def columns(warehouse, table: str) -> list[str]:
    rows = await warehouse.query(
        "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = {t:String} ORDER BY position",
        {"t": table},
    )
    return [row["name"] for row in rows]


async def log_rows(warehouse) -> int:
    return int((await warehouse.query("SELECT toString(count()) AS n FROM schema_migrations"))[0]["n"])


async def run_legacy_ddl(warehouse, up_to: int = 3) -> None:
    """An install made before migrations: the old `statements()`, run as `Warehouse.migrate()` ran them."""
    for statement in legacy_statements(up_to):
        await warehouse.command(statement)


# -- data, written as the workers write it ---------------------------------------------------------------------

ALICE, BOB, CAROL = (User(evm(n), "evm_address") for n in (1, 2, 3))
T0 = 1_790_000_000_000  # 2026-09-21T14:13:20Z


def conversion(project: str, dedup_id: str, user: User, name: str, hour: int, **args) -> ConversionRecord:
    at = T0 + hour * 3_600_000
    return ConversionRecord(
        project_id=project, batch_id="batch", dedup_id=dedup_id, name=name, user_identifier=user.identifier,
        user_identifier_type=user.identifier_type, timestamp_ms=at, received_ms=now_ms(), args=args,
    )  # fmt: skip


def usd(amount: str) -> dict:
    return {"amount": amount, "currency": {"name": "USD"}}


async def deliver(state, warehouse, project: str, *records) -> None:
    """Accept the conversions (their dedup ids), then write the delivery as a worker does."""
    conversions = [r for r in records if isinstance(r, ConversionRecord)]
    if conversions:
        users = [(User(c.user_identifier, c.user_identifier_type), c.name) for c in conversions]
        async with state.ingest(project, [c.dedup_id for c in conversions], users, None):
            pass
    await process_delivery(Delivery(uuid.uuid4().hex, list(records)), state, warehouse)


class AsOfVersion3:
    """A warehouse at version 3, written as the workers of then wrote: no `dedup_ids`, no `referrals.use_id`."""

    def __init__(self, warehouse):
        self._warehouse = warehouse

    async def insert(self, table: str, rows: list[dict], token: str) -> None:
        if table != "dedup_ids":
            await self._warehouse.insert(table, [{k: v for k, v in r.items() if k != "use_id"} for r in rows], token)

    async def query(self, sql: str, params: dict | None = None) -> list[dict]:
        return [] if "dedup_ids" in sql or "use_id" in sql else await self._warehouse.query(sql, params)


# populate's conversions: written once, whatever the state store forgets.
WRITTEN_BEFORE = {(dedup_archive.EVENT, d) for d in ("p1", "p2", "s1", "g1")}


async def populate(state, warehouse) -> str:
    """Alice refers Bob, Bob refers Carol; Alice registers as an affiliate; purchases and a signup pay points
    along the chain, a swap pays USDC (claim checks)."""
    project = await state.create_project("migrations")
    await state.put_config(project, PayoutConfig.model_validate(TOKEN_CONFIG))
    records = []
    for owner, user in ((ALICE, BOB), (BOB, CAROL)):
        async with state.create_codes(project, owner, 1, None) as created:
            records += decode_message(created.payload)
        async with state.use_code(project, created.value[0].code, user, {}) as used:
            records += decode_message(used.payload)
    affiliate = Affiliate(id=f"evm_address:{ALICE.identifier}", user=ALICE, name="Alice", status="active",
                          region="EU", audience=None, tax_status="verified", tier=None, created_at_ms=T0)  # fmt: skip
    async with state.create_affiliate(project, affiliate) as registered:
        records += decode_message(registered.payload)
    await deliver(state, warehouse, project, *records)
    await deliver(
        state, warehouse, project,
        conversion(project, "p1", BOB, "purchase", 0, value=usd("200")),
        conversion(project, "p2", CAROL, "purchase", 1, value=usd("50")),
        conversion(project, "s1", CAROL, "swap", 2, revenue=usd("100")),
        conversion(project, "g1", BOB, "signup", 3),
    )  # fmt: skip
    return project


# Every figure the query API reads, from the views' tables (summed: SummingMergeTree rows may not be merged yet).
FIGURES = {
    "project": "SELECT toString(sum(amount)) AS amount FROM point_totals_by_project WHERE project_id = {p:String}",
    "users": "SELECT role, recipient_identifier AS user, kind, toString(sum(amount)) AS amount,"
    " toString(sum(payouts)) AS payouts FROM point_totals_by_user WHERE project_id = {p:String}"
    " GROUP BY role, user, kind ORDER BY role, user, kind",
    "hours": "SELECT role, toString(hour) AS h, recipient_identifier AS user, toString(sum(amount)) AS amount"
    " FROM point_totals_by_user_hour WHERE project_id = {p:String} GROUP BY role, h, user ORDER BY role, h, user",
    "affiliate_stats": "SELECT toString(user_key) AS k, toString(sum(r1_volume)) AS r1, toString(sum(r2_volume)) AS r2,"
    " toString(sum(earnings)) AS e, toString(sum(referred_users)) AS n FROM affiliate_stats"
    " WHERE project_id = {p:String} GROUP BY k ORDER BY k",
    "daily": "SELECT toString(day) AS d, toString(user_key) AS k, toString(sum(r1_volume)) AS r1,"
    " toString(sum(earnings)) AS e FROM affiliate_stats_daily_by_user WHERE project_id = {p:String}"
    " GROUP BY d, k ORDER BY d, k",
    "listing": "SELECT user_identifier, status, toString(total_volume) AS volume, toString(earnings) AS earnings,"
    " toString(referred_users) AS referred FROM affiliate_listing FINAL WHERE project_id = {p:String}"
    " ORDER BY user_key",
    "claim_checks": "SELECT user_identifier, currency_name, status, toString(sum(amount)) AS amount,"
    " toString(count()) AS n FROM claim_checks FINAL WHERE project_id = {p:String}"
    " GROUP BY user_identifier, currency_name, status ORDER BY user_identifier, currency_name, status",
    "raw": "SELECT (SELECT toString(count()) FROM conversions WHERE project_id = {p:String}) AS conversions,"
    " (SELECT toString(count()) FROM payouts WHERE project_id = {p:String}) AS payouts,"
    " (SELECT toString(count()) FROM referrals WHERE project_id = {p:String}) AS referrals",
}


# The figures of §4 volumes (migration 012 recounts them in points).
VOLUMES = ("affiliate_stats", "daily", "listing")


async def figures(warehouse, project: str) -> dict:
    return {name: await warehouse.query(sql, {"p": project}) for name, sql in FIGURES.items()}


async def assert_views_match_payouts(warehouse, project: str) -> None:
    """The views agree with the raw payouts: nothing counted twice, nothing missing."""
    raw = await warehouse.query(
        "SELECT toString(sum(amount)) AS amount FROM payouts WHERE project_id = {p:String} AND currency = 'point'",
        {"p": project},
    )
    assert (await figures(warehouse, project))["project"] == raw


async def by_kind(warehouse, project: str) -> list[dict]:
    return await warehouse.query(
        "SELECT currency, kind, toString(sum(amount)) AS amount, toString(sum(payouts)) AS n FROM payout_totals_by_kind"
        " WHERE project_id = {p:String} GROUP BY currency, kind ORDER BY currency, kind",
        {"p": project},
    )


async def raw_by_kind(warehouse, project: str) -> list[dict]:
    return await warehouse.query(
        "SELECT currency, kind, toString(sum(amount)) AS amount, toString(count()) AS n FROM payouts"
        " WHERE project_id = {p:String} GROUP BY currency, kind ORDER BY currency, kind",
        {"p": project},
    )


# -- the runner, on both adapters ------------------------------------------------------------------------------


async def test_a_fresh_install_reaches_the_latest_version(warehouse, tmp_path):
    run = await migrations.migrate(warehouse)
    assert run.summary() == {"version": SHIPPED, "adopted": [], "applied": ALL, "reverted": []}
    creates = (re.match(r"CREATE (?:TABLE|MATERIALIZED VIEW) IF NOT EXISTS (\w+)", s) for s in schema.statements())
    created = {match[1] for match in creates if match}
    assert await tables(warehouse) == created | {"schema_migrations"}
    status = await migrations.status(warehouse)
    assert (status["version"], status["latest"], status["pending"], status["problems"]) == (SHIPPED, SHIPPED, [], [])
    assert [(m["state"], m["adopted"], m["checksum"]) for m in status["migrations"]] == [
        ("applied", False, "ok")] * SHIPPED  # fmt: skip

    later = schema.load_migrations(migrations_dir(tmp_path))  # a release with two more: they run, in order
    run = await migrations.migrate(warehouse, migrations=later)
    assert run.summary() == {"version": AFTER, "adopted": [], "applied": [NEXT, AFTER], "reverted": []}
    assert "payout_totals_by_kind" in await tables(warehouse) and "channel" in await columns(warehouse, "conversions")


async def test_running_again_changes_nothing(warehouse, tmp_path):
    await warehouse.migrate()  # the port's migrate: the package's migrations
    rows, before = await log_rows(warehouse), await tables(warehouse)
    await warehouse.migrate()
    assert await log_rows(warehouse) == rows == SHIPPED and await tables(warehouse) == before

    later = schema.load_migrations(migrations_dir(tmp_path))
    await migrations.migrate(warehouse, migrations=later)
    rows, before = await log_rows(warehouse), await tables(warehouse)
    spy = Spy(warehouse)
    assert (await migrations.migrate(spy, migrations=later)).summary()["applied"] == []
    assert len(spy.commands) == 1 and "schema_migrations" in spy.commands[0]  # the log's CREATE ... IF NOT EXISTS
    assert await log_rows(warehouse) == rows and await tables(warehouse) == before


async def test_an_install_made_before_migrations_is_adopted_then_upgraded(warehouse, state, tmp_path):
    await run_legacy_ddl(warehouse)
    project = await populate(state, AsOfVersion3(warehouse))
    before = await figures(warehouse, project)
    # Code uses 2 x (50 + 10); Bob's purchase 10 + Alice 20; Carol's 10 + Bob 5 + Alice 2.5; Bob's signup 5 + 5
    # (campaign) + Alice 10. The swap pays USDC.
    assert before["project"] == [{"amount": "187.5"}]
    assert len(before["listing"]) >= 1 and any(r["status"] == "active" for r in before["listing"])
    assert before["claim_checks"] and before["raw"][0]["conversions"] == "4"
    await assert_views_match_payouts(warehouse, project)

    status = await migrations.status(warehouse)
    assert [m["state"] for m in status["migrations"]] == ["adoptable"] * 3 + ["pending"] * (SHIPPED - 3)
    assert status["version"] == 3
    spy, later = Spy(warehouse), schema.load_migrations(migrations_dir(tmp_path))
    run = await migrations.migrate(spy, migrations=later)
    assert run.summary() == {"version": AFTER, "adopted": [1, 2, 3], "applied": [*ALL[3:], NEXT, AFTER], "reverted": []}
    ran = " ".join(spy.commands)
    assert "CREATE TABLE IF NOT EXISTS payouts" not in ran and "point_totals_by_project" not in ran  # not re-run
    after = await figures(warehouse, project)
    assert {k: v for k, v in after.items() if k not in VOLUMES} == {k: v for k, v in before.items() if k not in VOLUMES}
    # Migration 012 counts the §4 volumes in points: the swap's base (30 USDC) leaves Bob's r1 and Alice's r2, as the
    # workers now write them.
    fresh = await figures(warehouse, await populate(state, warehouse))
    assert {k: after[k] for k in VOLUMES} == {k: fresh[k] for k in VOLUMES} != {k: before[k] for k in VOLUMES}
    assert await by_kind(warehouse, project) == await raw_by_kind(warehouse, project)  # the new view, backfilled
    assert len(await by_kind(warehouse, project)) >= 3
    rows = await warehouse.query(
        "SELECT DISTINCT channel FROM conversions WHERE project_id = {p:String}", {"p": project}
    )
    assert rows == [{"channel": ""}]
    written = await dedup_archive.written_among(warehouse, project, WRITTEN_BEFORE, 35 * 86400)
    assert set(written) == WRITTEN_BEFORE  # what the workers wrote before, backfilled: never paid twice
    uses = "SELECT uniqExact(dedup_id) AS n FROM dedup_ids WHERE project_id = {p:String} AND kind = 'code_use'"
    assert int((await warehouse.query(uses, {"p": project}))[0]["n"]) == 2  # the two code uses, from their payouts

    # The pipeline writes on: the old views and the new one count each new payout once.
    await deliver(state, warehouse, project, conversion(project, "p3", BOB, "purchase", 5, value=usd("30")))
    after = await figures(warehouse, project)
    assert after["raw"][0]["conversions"] == "5" and after["project"] != before["project"]
    await assert_views_match_payouts(warehouse, project)
    assert await by_kind(warehouse, project) == await raw_by_kind(warehouse, project)
    status = await migrations.status(warehouse, later)
    assert [(m["version"], m["state"], m["adopted"]) for m in status["migrations"]] == [
        (v, "applied", v <= 3) for v in range(1, AFTER + 1)]  # fmt: skip


async def test_an_install_from_before_version_3_adopts_1_and_2_and_runs_3(warehouse):
    await run_legacy_ddl(warehouse, up_to=2)
    assert "dead_letters" not in await tables(warehouse)
    run = await migrations.migrate(warehouse)
    assert run.summary() == {"version": SHIPPED, "adopted": [1, 2], "applied": ALL[2:], "reverted": []}
    assert "dead_letters" in await tables(warehouse)


async def test_down_steps_undo_and_redo(warehouse, state, tmp_path):
    later = schema.load_migrations(migrations_dir(tmp_path))
    await migrations.migrate(warehouse, target=SHIPPED)
    project = await populate(state, warehouse)
    before = await figures(warehouse, project)
    assert (await migrations.migrate(warehouse, migrations=later)).summary()["applied"] == [NEXT, AFTER]

    run = await migrations.migrate(warehouse, target=SHIPPED, migrations=later)
    assert run.summary() == {"version": SHIPPED, "adopted": [], "applied": [], "reverted": [AFTER, NEXT]}
    assert "payout_totals_by_kind" not in await tables(warehouse)
    assert "payout_totals_by_kind_mv" not in await tables(warehouse)
    assert "channel" not in await columns(warehouse, "conversions")
    assert await figures(warehouse, project) == before
    status = await migrations.status(warehouse, later)
    assert (status["version"], status["pending"]) == (SHIPPED, [NEXT, AFTER])

    with pytest.raises(migrations.MigrationError, match=r"down to version 1: migration 3 \(dead_letters\), 2 "):
        await migrations.migrate(warehouse, target=1, migrations=later)
    with pytest.raises(migrations.MigrationError, match=f"no version {AFTER + 1}"):
        await migrations.migrate(warehouse, target=AFTER + 1, migrations=later)
    assert (await migrations.status(warehouse, later))["version"] == SHIPPED  # refused before doing anything

    assert (await migrations.migrate(warehouse, target=NEXT, migrations=later)).summary()["applied"] == [NEXT]
    assert await by_kind(warehouse, project) == await raw_by_kind(warehouse, project)  # backfilled again
    assert "channel" not in await columns(warehouse, "conversions")
    assert (await migrations.migrate(warehouse, migrations=later)).summary()["applied"] == [AFTER]
    assert await figures(warehouse, project) == before


async def test_a_failed_migration_is_not_recorded_and_runs_again_from_its_start(warehouse, state, tmp_path):
    await migrations.migrate(warehouse)
    project = await populate(state, warehouse)
    failing = POINTS_BY_KIND.replace("-- down", "SELECT throwIf(1, 'the engine went away');\n-- down")
    with pytest.raises(
        migrations.MigrationError, match=rf"{NEXT:03d}_points_by_kind \(apply\) failed at statement 5 of 5"
    ):
        await migrations.migrate(warehouse, migrations=schema.load_migrations(
            migrations_dir(tmp_path, {POINTS_FILE: failing})))  # fmt: skip
    assert await by_kind(warehouse, project) == await raw_by_kind(warehouse, project)  # the backfill did run
    status = await migrations.status(warehouse, schema.load_migrations(migrations_dir(tmp_path)))
    assert (status["version"], status["pending"]) == (SHIPPED, [NEXT, AFTER])

    run = await migrations.migrate(warehouse, migrations=schema.load_migrations(migrations_dir(tmp_path)))
    assert run.summary()["applied"] == [NEXT, AFTER]
    assert await by_kind(warehouse, project) == await raw_by_kind(warehouse, project)  # not counted twice


# The affiliate portal's tables (migration 11), summed per key without the project (two projects compare).
PORTAL = "WHERE project_id = {p:String} GROUP BY ALL ORDER BY ALL"
PORTAL_FIGURES = {
    "daily": "SELECT toString(user_key) AS k, toString(day) AS d, level, toString(trader_key) AS t, name,"
    " toString(sum(volume)) AS v, toString(sum(revenue)) AS r, sum(attributions) AS n"
    f" FROM affiliate_portal_daily {PORTAL}",
    "earnings": "SELECT toString(user_key) AS k, toString(day) AS d, level, name, currency, toString(sum(amount)) AS a,"
    " toString(sum(paid_volume)) AS v, toString(sum(paid_revenue)) AS r, sum(paid_attributions) AS n"
    f" FROM affiliate_portal_earnings_daily {PORTAL}",
    "totals": "SELECT toString(user_key) AS k, max(status) AS s, max(region) AS g, toString(sum(volume)) AS v,"
    " toString(sum(revenue)) AS r,"
    " sum(attributions) AS n, sum(referred_users) AS referred, toString(sumMap(earnings)) AS e"
    f" FROM affiliate_portal_totals {PORTAL}",
    "edges": "SELECT toString(referrer_key) AS r, toString(user_key) AS u, max(user_identifier) AS id,"
    f" max(removed) AS removed FROM referral_edges {PORTAL}",
    "own": "SELECT toString(user_key) AS k, toString(day) AS d, name, toString(sum(volume)) AS v,"
    f" toString(sum(revenue)) AS r, sum(conversions) AS n FROM user_conversions_daily {PORTAL}",
}  # fmt: skip


async def test_the_affiliate_portal_backfill_makes_what_its_views_make(warehouse, state):
    await migrations.migrate(warehouse, target=10)
    before = await populate(state, warehouse)  # written before migration 11: its backfill reads it
    assert (await migrations.migrate(warehouse, target=11)).summary()["applied"] == [11]
    after = await populate(state, warehouse)  # written after: its views make the rows
    for name, sql in PORTAL_FIGURES.items():
        backfilled = await warehouse.query(sql, {"p": before})
        assert backfilled == await warehouse.query(sql, {"p": after}), name
        assert backfilled, name
    # Bob's purchase of 200 and signup are Alice's level 1; Carol's purchase of 50 and swap (revenue 100) Bob's level
    # 1 and Alice's level 2.
    levels = "SELECT level, toString(sum(volume)) AS v, toString(sum(revenue)) AS r, sum(attributions) AS n"
    levels += " FROM affiliate_portal_daily WHERE project_id = {p:String} AND user_key = {k:UInt128}"
    levels += " GROUP BY level ORDER BY level"
    for user, expected in ((ALICE, [(1, "200", "0", 2), (2, "50", "100", 2)]), (BOB, [(1, "50", "100", 2)])):
        rows = await warehouse.query(levels, {"p": before, "k": await _key(warehouse, user)})
        assert [(row["level"], row["v"], row["r"], row["n"]) for row in rows] == expected


async def _key(warehouse, user: User) -> int:
    sql = "SELECT toString(reinterpretAsUInt128(sipHash128({t:String}, {i:String}))) AS k"
    return int((await warehouse.query(sql, {"t": user.identifier_type, "i": user.identifier}))[0]["k"])


async def test_a_changed_applied_migration_is_refused(warehouse, tmp_path):
    directory = migrations_dir(tmp_path)
    await migrations.migrate(warehouse, migrations=schema.load_migrations(directory))
    rows = await log_rows(warehouse)
    recommented = POINTS_BY_KIND.replace("-- The backfill", "-- Backfilled").replace("DROP TABLE", "DROP TABLE ")
    (directory / POINTS_FILE).write_text(recommented)  # comments and down steps may change
    assert (await migrations.migrate(warehouse, migrations=schema.load_migrations(directory))).steps == []

    (directory / POINTS_FILE).write_text(POINTS_BY_KIND.replace("toUInt64(1)", "toUInt64(2)"))
    changed = schema.load_migrations(directory)
    for target in (None, SHIPPED, AFTER):
        with pytest.raises(migrations.MigrationError, match=rf"migration {NEXT} \(points_by_kind\) changed since"):
            await migrations.migrate(warehouse, target=target, migrations=changed)
    status = await migrations.status(warehouse, changed)
    assert [m["checksum"] for m in status["migrations"]] == ["ok"] * SHIPPED + ["mismatch", "ok"]
    assert len(status["problems"]) == 1 and "restore it" in status["problems"][0]
    assert await log_rows(warehouse) == rows


async def test_a_warehouse_newer_than_the_code_is_refused(warehouse, tmp_path):
    await migrations.migrate(warehouse, migrations=schema.load_migrations(migrations_dir(tmp_path)))
    with pytest.raises(migrations.MigrationError, match=rf"migration {NEXT} \(points_by_kind\) is applied but unknown"):
        await migrations.migrate(warehouse)
    with pytest.raises(migrations.MigrationError, match="newer than the code"):
        await warehouse.migrate()
    status = await migrations.status(warehouse)
    assert [(m["version"], m["state"]) for m in status["migrations"]][SHIPPED:] == [
        (NEXT, "unknown"),
        (AFTER, "unknown"),
    ]


async def test_the_embedded_server_migrates_at_start_up(tmp_path):
    """`rewards serve` opens its backends with runtime.wiring.open_embedded: the same runner, on chdb."""
    warehouse = ChdbWarehouse(tmp_path / "warehouse")
    await run_legacy_ddl(warehouse, up_to=2)
    await warehouse.close()
    backends = await open_embedded(Settings(data_dir=tmp_path))
    try:
        status = await migrations.status(backends.warehouse)
        assert [(m["state"], m["adopted"]) for m in status["migrations"]] == [("applied", True)] * 2 + [
            ("applied", False)] * (SHIPPED - 2)  # fmt: skip
    finally:
        await backends.close()


# -- the command line --------------------------------------------------------------------------------------------


def cli(place: Place, *args: str):
    result = CliRunner().invoke(app, ["migrate", *args], env=place.cli_env())
    return result.exit_code, json.loads(result.stdout) if result.stdout else None, result.stderr


def test_migrate_status_and_to(place, tmp_path, monkeypatch):
    if place.kind == "chdb":
        (place.data_dir / "warehouse").mkdir(parents=True)  # an empty embedded warehouse
    code, status, _ = cli(place, "--status")
    assert code == 0 and status["warehouse"] == ("embedded" if place.kind == "chdb" else "clickhouse")
    assert (status["version"], status["latest"], status["pending"]) == (0, SHIPPED, ALL)
    assert [m["state"] for m in status["migrations"]] == ["pending"] * SHIPPED

    code, done, err = cli(place, "--to", "2")
    assert code == 0, err
    assert done == {"warehouse": status["warehouse"], "version": 2, "adopted": [], "applied": [1, 2], "reverted": []}
    assert "migrating" in err  # the progress bar, on stderr, while several run
    code, status, _ = cli(place, "--status")
    assert (status["version"], status["pending"]) == (2, ALL[2:])
    applied = status["migrations"][0]
    assert applied["state"] == "applied" and applied["checksum"] == "ok" and applied["applied_at"].endswith("Z")

    code, _, err = cli(place, "--to", "1")
    assert code == 1 and "migration 2 (affiliates_claims) has no down steps" in json.loads(err)["error"]

    directory = migrations_dir(tmp_path)
    monkeypatch.setattr(schema, "migrations_dir", lambda: directory)  # a release with NEXT and AFTER
    code, done, _ = cli(place, "--to", str(AFTER))
    assert (code, done["applied"]) == (0, [*ALL[2:], NEXT, AFTER])
    code, done, _ = cli(place, "--to", "3")
    assert (code, done["reverted"]) == (0, list(range(AFTER, 3, -1)))
    code, status, _ = cli(place, "--status")
    assert (status["version"], status["pending"]) == (3, [*ALL[3:], NEXT, AFTER])
    assert [m["reversible"] for m in status["migrations"]] == [False] * 3 + [True] * (AFTER - 3)

    cli(place, "--to", str(NEXT))
    (directory / POINTS_FILE).write_text(POINTS_BY_KIND.replace("toUInt64(1)", "toUInt64(2)"))
    code, status, _ = cli(place, "--status")
    assert code == 0 and status["migrations"][SHIPPED]["checksum"] == "mismatch" and status["problems"]
    code, _, err = cli(place, "--to", str(AFTER))
    assert code == 1 and "changed since it was applied" in json.loads(err)["error"]
    code, _, err = cli(place, "--status", "--to", str(AFTER))
    assert code == 1


def test_status_without_a_warehouse_says_so(tmp_path):
    place = Place("chdb", data_dir=tmp_path / "nothing")
    code, _, err = cli(place, "--status")
    assert code == 1 and "no embedded warehouse" in json.loads(err)["error"]
    assert not (tmp_path / "nothing").exists()


def test_rewards_migrate_on_the_production_shape(server_place, kafka_url, redis_url):
    """Plain `rewards migrate` (topics and warehouse, as deploy/ runs it), twice: the second applies nothing."""
    env = {**server_place.cli_env(), "KAFKA_BOOTSTRAP_SERVERS": kafka_url, "REDIS_URL": redis_url}
    first = CliRunner().invoke(app, ["migrate"], env=env)
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["migrations"] == {"version": SHIPPED, "adopted": [], "applied": ALL,
                                                      "reverted": []}  # fmt: skip
    second = CliRunner().invoke(app, ["migrate"], env=env)
    assert second.exit_code == 0 and json.loads(second.stdout)["migrations"]["applied"] == []
