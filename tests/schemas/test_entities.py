"""The entities' declarations (schemas/entities.py) hold: the warehouse the migrations make has each declared table
with exactly the declared columns, and what is derived from them shows each entity as it was written out before."""

import pytest

from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from rewards.domain.affiliates import STORED_ATTRIBUTES, stored_affiliate, stored_attributes
from rewards.domain.payouts import User
from rewards.ports import Affiliate
from schemas.entities import AFFILIATE, ENTITIES, Entity
from schemas.records import (
    AffiliateRecord,
    ClaimCheckRecord,
    CodesCreatedRecord,
    CodeUseRecord,
    ConversionRecord,
    TrackingEventRecord,
)
from stream_workers.handlers.code_use import referral_row
from stream_workers.handlers.conversion import conversion_row
from stream_workers.handlers.stored import affiliate_row, claim_check_record_row, code_rows, tracking_event_row


@pytest.fixture(scope="module")
async def migrated_columns(tmp_path_factory) -> dict[str, dict[str, str]]:
    """Each table of a freshly migrated chdb warehouse: column name → type, as system.columns writes it."""
    warehouse = ChdbWarehouse(tmp_path_factory.mktemp("entities") / "warehouse")
    try:
        await warehouse.migrate()
        found = await warehouse.query(
            "SELECT table, name, type FROM system.columns WHERE database = currentDatabase() ORDER BY table, position"
        )
    finally:
        await warehouse.close()
    tables: dict[str, dict[str, str]] = {}
    for column in found:
        tables.setdefault(column["table"], {})[column["name"]] = column["type"]
    return tables


def column_differences(declared: dict[str, str], migrated: dict[str, str]) -> list[str]:
    missing = [f"  {name} {kind}: declared, not in the DDL" for name, kind in declared.items() if name not in migrated]
    extra = [f"  {name} {kind}: in the DDL, not declared" for name, kind in migrated.items() if name not in declared]
    differ = [
        f"  {name}: declared {kind}, the DDL makes it {migrated[name]}"
        for name, kind in declared.items()
        if name in migrated and migrated[name] != kind
    ]
    return missing + extra + differ


@pytest.mark.parametrize("entity", ENTITIES, ids=lambda entity: entity.type)
async def test_the_migrations_make_the_declared_columns(entity: Entity, migrated_columns):
    assert entity.table in migrated_columns, f"no table {entity.table} after the migrations"
    differences = column_differences(entity.columns(), migrated_columns[entity.table])
    assert not differences, f"table {entity.table} and the declaration of {entity.type} differ:\n" + "\n".join(
        differences
    )


def test_a_difference_is_named():
    declared = {"a": "String", "b": "UInt8", "c": "String"}
    migrated = {"a": "String", "b": "Int64", "d": "String"}
    assert column_differences(declared, migrated) == [
        "  c String: declared, not in the DDL",
        "  d String: in the DDL, not declared",
        "  b: declared UInt8, the DDL makes it Int64",
    ]


# Each record with the row (or rows) its table had before the rows were derived from the declarations.
RECORDS_AND_ROWS = [
    (
        ConversionRecord(
            project_id="p", batch_id="b", dedup_id="d", name="purchase", user_identifier="0xab",
            user_identifier_type="evm_address", timestamp_ms=1_790_000_000_123, received_ms=1_790_000_000_456,
            args={"value": {"amount": "1.5"}}, metadata={"é": "ü"},
        ),
        conversion_row,
        {
            "project_id": "p", "dedup_id": "d", "name": "purchase", "user_identifier": "0xab",
            "user_identifier_type": "evm_address", "timestamp": "2026-09-21 14:13:20.123",
            "received_at": "2026-09-21 14:13:20.456", "batch_id": "b", "args": '{"value":{"amount":"1.5"}}',
            "metadata": '{"é":"ü"}',
        },
    ),
    (
        CodeUseRecord(
            project_id="p", use_id="u", code="ABC", owner_identifier="o", owner_identifier_type="email",
            user_identifier="x", user_identifier_type="email", used_at_ms=5, max_uses=3,
        ),
        referral_row,
        {
            "project_id": "p", "user_identifier_type": "email", "user_identifier": "x",
            "referrer_identifier_type": "email", "referrer_identifier": "o", "code": "ABC",
            "referred_at": "1970-01-01 00:00:00.005", "use_id": "u",
        },
    ),
    (
        CodesCreatedRecord(
            project_id="p", codes=["A", "B"], owner_identifier="o", owner_identifier_type="email", created_at_ms=6
        ),
        code_rows,
        [
            {"project_id": "p", "code": code, "owner_identifier_type": "email", "owner_identifier": "o",
             "created_at": "1970-01-01 00:00:00.006"}
            for code in ("A", "B")
        ],
    ),
    (
        AffiliateRecord(
            project_id="p", id="i", user_identifier="o", user_identifier_type="email", name="N", status="active",
            region="EU", tax_status="verified", created_at_ms=7,
        ),
        affiliate_row,
        {
            "project_id": "p", "id": "i", "user_identifier": "o", "user_identifier_type": "email", "name": "N",
            "status": "active", "region": "EU", "audience": None, "tax_status": "verified", "tier": None,
            "created_at": "1970-01-01 00:00:00.007",
        },
    ),
    (
        ClaimCheckRecord(
            project_id="p", id="c", user_identifier="o", user_identifier_type="email", currency_address="0x1",
            currency_chain_id=1, currency_name="USDC", currency_decimals=6, amount="1000000",
            reason="end_user_payout", status="open", source_id="s", created_at_ms=8, version=1,
        ),
        claim_check_record_row,
        {
            "project_id": "p", "id": "c", "user_identifier": "o", "user_identifier_type": "email",
            "currency_address": "0x1", "currency_chain_id": 1, "currency_name": "USDC", "currency_decimals": 6,
            "amount": "1000000", "reason": "end_user_payout", "status": "open", "hash": None, "source_id": "s",
            "version": 1, "created_at": "1970-01-01 00:00:00.008", "claimed_at": None, "expires_at": None,
        },
    ),
    (
        TrackingEventRecord(
            project_id="p", id="t", name="pageview", tracking_id="TRK", code="ABC", received_ms=9,
            args={"page": "/"}, metadata={"tracking_id": "TRK", "af": "abc"},
        ),
        tracking_event_row,
        {
            "project_id": "p", "id": "t", "name": "pageview", "tracking_id": "TRK", "user_identifier": "",
            "user_identifier_type": "", "code": "ABC", "received_at": "1970-01-01 00:00:00.009",
            "args": '{"page":"/"}', "metadata": '{"tracking_id":"TRK","af":"abc"}', "signature": None,
            "signature_message": None, "signature_public_key": None, "account_chain_id": None,
        },
    ),
]  # fmt: skip


@pytest.mark.parametrize(("record", "row_of", "row"), RECORDS_AND_ROWS, ids=[case[0].type for case in RECORDS_AND_ROWS])
def test_a_derived_row_is_the_row_written_out_before(record, row_of, row):
    assert row_of(record) == row


def test_an_affiliate_holds_the_declared_fields_and_reads_back_as_stored():
    affiliate = Affiliate("a", User("o", "email"), None, "active", "EU", None, "missing", "gold", 1)
    assert list(vars(affiliate)) == list(AFFILIATE.attributes(User))
    stored = stored_attributes(affiliate)
    assert list(stored) == [
        "id", "name", "status", "region", "audience", "tax_status", "tier", "created_at_ms",
    ] == list(STORED_ATTRIBUTES)  # fmt: skip
    assert stored_affiliate(affiliate.user, stored) == affiliate
    # A document stored before an optional attribute was declared reads back with its default.
    assert stored_affiliate(affiliate.user, {k: v for k, v in stored.items() if k != "region"}).region is None
