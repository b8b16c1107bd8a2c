"""The warehouse's half of an erasure (rewards.adapters.warehouse_erasure) on chdb and a ClickHouse server: a user
written into every table that can name one (and through them every view), in two projects; after one project's round,
no column of any table holds the identifier for that project, in any form, and the other project's rows are as they
were."""

import pytest

from rewards.adapters import warehouse_erasure
from rewards.domain import erasure
from rewards.domain.payouts import User
from tests.support.warehouses import migrated_warehouse

USER = User("0x" + "ab" * 20, "evm_address")
ERASED_IN, KEPT_IN = "p_erased", "p_kept"
JSON_TEXTS = (("dead_letters", "payload"), ("payout_decisions", "payout"))


@pytest.fixture(scope="module", params=["chdb", "clickhouse"])
async def warehouse(request, tmp_path_factory):
    warehouse = await migrated_warehouse(request.param, request, tmp_path_factory.mktemp("erasure") / "wh", "erasure")
    yield warehouse
    await warehouse.close()


def _value(column: str, column_type: str, columns: set[str], table: str) -> str | None:
    """What a row naming {user} holds in `column` (None: the column's default)."""
    if column == "project_id":
        return "{project:String}"
    if column.endswith("identifier") and f"{column}_type" in columns:
        return "{user:String}"
    if column.endswith("identifier_type") and column.removesuffix("_type") in columns:
        return "'evm_address'"
    if column.endswith("_key") and column_type == "UInt128":
        return "reinterpretAsUInt128(sipHash128('evm_address', {user:String}))"
    if column == "id" and "user_identifier" in columns:
        return "concat('evm_address:', {user:String})"
    if column in ("signature", "signature_message", "signature_public_key"):
        return "concat('I confirm ', {user:String})"
    if (table, column) in JSON_TEXTS or column in ("args", "metadata"):
        return 'concat(\'{"u":"\', {user:String}, \'","t":"evm_address:\', {user:String}, \'"}\')'
    if (table, column) == ("dead_letters", "reason"):
        return "concat('invalid: input_value=''', {user:String}, '''')"
    if column_type.startswith("DateTime"):  # now: a row past a table's TTL would be dropped as it is written
        return "now64(3)" if column_type.startswith("DateTime64") else "now()"
    return None


async def _seed(warehouse, project: str) -> None:
    """A row naming USER in every table that has a column for it (found apart from the code under test)."""
    tables = await warehouse.query(
        "SELECT c.table AS table, groupArray(c.name) AS names, groupArray(c.type) AS types FROM system.columns AS c"
        " INNER JOIN system.tables AS t ON t.database = c.database AND t.name = c.table"
        " WHERE c.database = currentDatabase() AND t.engine LIKE '%MergeTree'"
        " AND c.default_kind NOT IN ('ALIAS', 'MATERIALIZED') GROUP BY c.table"
    )
    for table in tables:
        names = set(table["names"])
        chosen = [
            (name, _value(name, kind, names, table["table"]))
            for name, kind in zip(table["names"], table["types"], strict=True)
        ]
        chosen = [(name, value) for name, value in chosen if value is not None]
        if "project_id" not in names or all("{user:String}" not in value for _, value in chosen):
            continue
        columns = ", ".join(name for name, _ in chosen)
        values = ", ".join(value for _, value in chosen)
        await warehouse.query(
            f"INSERT INTO {table['table']} ({columns}) SELECT {values}", {"project": project, "user": USER.identifier}
        )


async def _holding(warehouse, project: str, text: str) -> list[str]:
    """`table.column` of every column of the project's rows that holds `text` anywhere."""
    tables = await warehouse.query(
        "SELECT c.table AS table, groupArray(c.name) AS columns FROM system.columns AS c INNER JOIN system.tables AS t"
        " ON t.database = c.database AND t.name = c.table WHERE c.database = currentDatabase()"
        " AND t.engine LIKE '%MergeTree' AND c.type NOT LIKE 'AggregateFunction%'"
        " AND c.table IN (SELECT table FROM system.columns WHERE database = currentDatabase() AND name = 'project_id')"
        " GROUP BY c.table"
    )
    found = []
    for row in tables:
        for column in row["columns"]:
            held = await warehouse.query(
                f"SELECT count() AS n FROM {row['table']} WHERE project_id = {{p:String}}"
                f" AND position(toString({column}), {{text:String}}) > 0",
                {"p": project, "text": text},
            )
            if int(held[0]["n"]):
                found.append(f"{row['table']}.{column}")
    return found


async def test_no_table_holds_the_identifier_after_a_round_and_another_project_keeps_it(warehouse):
    await _seed(warehouse, ERASED_IN)
    await _seed(warehouse, KEPT_IN)
    before = await _holding(warehouse, KEPT_IN, USER.identifier)
    assert len(before) >= 20 and "dead_letters.payload" in before and "tracking_events.signature" in before

    pseudonym = erasure.pseudonym(erasure.new_salt(), USER)
    tables = await warehouse_erasure.erase_users(warehouse, {(ERASED_IN, USER): pseudonym})

    assert await _holding(warehouse, ERASED_IN, USER.identifier) == []
    assert await _holding(warehouse, ERASED_IN, USER.identifier.upper()[2:]) == []  # nor in another case
    assert "payouts" in tables and "dead_letters" in tables and "affiliate_listing" in tables
    assert await _holding(warehouse, KEPT_IN, USER.identifier) == before  # the other project's rows: untouched
    renamed = await _holding(warehouse, ERASED_IN, pseudonym.identifier)
    assert "payouts.recipient_identifier" in renamed and "dead_letters.payload" in renamed
    key = await warehouse.query(
        "SELECT count() AS n FROM affiliate_listing WHERE project_id = {p:String}"
        " AND user_key = reinterpretAsUInt128(sipHash128('evm_address', {u:String}))",
        {"p": ERASED_IN, "u": pseudonym.identifier},
    )
    assert int(key[0]["n"]) >= 1  # the key recomputed from the pseudonym
    assert await warehouse_erasure.erase_users(warehouse, {(ERASED_IN, USER): pseudonym}) == []  # nothing left
