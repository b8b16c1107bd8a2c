"""The log's records serialize exactly as their pydantic models do, and load back equal."""

from schemas.events import ValidEvent
from schemas.records import (
    AffiliateRecord,
    ClaimCheckRecord,
    CodesCreatedRecord,
    CodeUseRecord,
    ConversionRecord,
    _records,
    dump_conversions,
    dump_records,
    load_records,
)

RECORDS = [
    ConversionRecord(
        project_id="p", batch_id="b", dedup_id="d", name="purchase", user_identifier="0xab",
        user_identifier_type="evm_address", timestamp_ms=1, received_ms=2,
        args={"value": {"amount": "1.50", "currency": {"name": "USDC"}}, "n": [1, None, True]},
        metadata={"é": "ü"},
    ),
    ConversionRecord(
        project_id="p", batch_id="b", dedup_id="e", name="signup", user_identifier="a@b.co",
        user_identifier_type="email", timestamp_ms=3, received_ms=4,
    ),
    CodeUseRecord(
        project_id="p", use_id="u", code="ABC1234", owner_identifier="o", owner_identifier_type="email",
        user_identifier="x", user_identifier_type="email", used_at_ms=5,
    ),
    CodesCreatedRecord(project_id="p", codes=["A", "B"], owner_identifier="o", owner_identifier_type="email",
                       created_at_ms=6),
    AffiliateRecord(project_id="p", id="i", user_identifier="o", user_identifier_type="email", status="active",
                    tax_status="verified", created_at_ms=7),
    ClaimCheckRecord(
        project_id="p", id="c", user_identifier="o", user_identifier_type="email", currency_address="0x1",
        currency_chain_id=1, currency_name="USDC", currency_decimals=6, amount="1000000", reason="end_user_payout",
        status="claimed", hash="0xh", source_id="s", created_at_ms=8, claimed_at_ms=9, version=3,
    ),
]  # fmt: skip


def test_records_dump_as_their_models_and_load_back_equal():
    assert dump_records(RECORDS) == _records.dump_json(RECORDS)
    assert load_records(dump_records(RECORDS)) == RECORDS


def test_conversions_dump_as_their_records():
    events = [
        ValidEvent("purchase", "d1", "0xab", "evm_address", 1_700_000_000_123, {"value": {"amount": "2"}}, {"k": "v"}),
        ValidEvent("signup", "d2", "a@b.co", "email", None, {}, {}),
    ]
    records = [
        ConversionRecord(
            project_id="p",
            batch_id="b",
            dedup_id=e.dedup_id,
            name=e.name,
            user_identifier=e.user_identifier,
            user_identifier_type=e.user_identifier_type,
            timestamp_ms=e.timestamp_ms or 42,
            received_ms=42,
            args=e.args,
            metadata=e.metadata,
        )
        for e in events
    ]
    assert dump_conversions("p", "b", 42, events) == dump_records(records)
