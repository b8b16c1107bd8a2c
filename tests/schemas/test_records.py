"""The log's records serialize exactly as their pydantic models do, and load back equal."""

from typing import get_args

from ingest_api.events.schemas import ValidEvent
from schemas.records import (
    AffiliateRecord,
    AnyRecord,
    ClaimCheckRecord,
    CodesCreatedRecord,
    CodeUseRecord,
    ConversionRecord,
    TrackingEventRecord,
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
    TrackingEventRecord(
        project_id="p", id="t", name="connect_wallet", tracking_id="TRK-1", user_identifier="0xab",
        user_identifier_type="evm_address", code="ABC1234", received_ms=10, args={"page": "/"},
        metadata={"tracking_id": "TRK-1"}, signature="0xsig", signature_message="m", account_chain_id=8453,
    ),
    TrackingEventRecord(project_id="p", id="u", name="pageview", tracking_id="TRK-2", received_ms=11),
]  # fmt: skip


def test_records_dump_as_their_models_and_load_back_equal():
    # `replay` is written only when set (a replayed dead letter's): the messages of everything else stay as they were.
    assert dump_records(RECORDS) == _records.dump_json(RECORDS, exclude={"__all__": {"replay"}})
    assert load_records(dump_records(RECORDS)) == RECORDS
    replayed = [record.model_copy(update={"replay": "dl_1"}) for record in RECORDS]
    assert dump_records(replayed) == _records.dump_json(replayed)
    assert load_records(dump_records(replayed)) == replayed


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


# The published contract: each record's fields in the order they are written, with their types ("?": optional, with
# a default). The fields are declared in schemas/entities.py: a declaration changed there shows here.
PUBLISHED = {
    "ConversionRecord": [
        "type?: Literal['conversion']", "project_id: str", "batch_id: str", "dedup_id: str", "name: str",
        "user_identifier: str", "user_identifier_type: str", "timestamp_ms: int", "received_ms: int", "args?: dict",
        "metadata?: dict",
    ],
    "CodeUseRecord": [
        "type?: Literal['code_use']", "project_id: str", "use_id: str", "code: str", "owner_identifier: str",
        "owner_identifier_type: str", "user_identifier: str", "user_identifier_type: str", "used_at_ms: int",
        "max_uses?: int | None",
    ],
    "CodesCreatedRecord": [
        "type?: Literal['codes_created']", "project_id: str", "codes: list[str]", "owner_identifier: str",
        "owner_identifier_type: str", "created_at_ms: int",
    ],
    "AffiliateRecord": [
        "type?: Literal['affiliate']", "project_id: str", "id: str", "user_identifier: str",
        "user_identifier_type: str", "name?: str | None", "status: str", "region?: str | None",
        "audience?: str | None", "tax_status: str", "tier?: str | None", "created_at_ms: int",
    ],
    "ClaimCheckRecord": [
        "type?: Literal['claim_check']", "project_id: str", "id: str", "user_identifier: str",
        "user_identifier_type: str", "currency_address: str", "currency_chain_id: int", "currency_name: str",
        "currency_decimals: int", "amount: str", "reason: str", "status: str", "hash?: str | None", "source_id: str",
        "created_at_ms: int", "claimed_at_ms?: int | None", "version: int", "expires_at_ms?: int | None",
    ],
    "TrackingEventRecord": [
        "type?: Literal['tracking_event']", "project_id: str", "id: str", "name: str", "tracking_id: str",
        "user_identifier?: str", "user_identifier_type?: str", "code?: str", "received_ms: int", "args?: dict",
        "metadata?: dict", "signature?: str | None", "signature_message?: str | None",
        "signature_public_key?: str | None", "account_chain_id?: int | None",
    ],
    "ReferralRemovedRecord": [
        "type?: Literal['referral_removed']", "project_id: str", "id: str", "use_id: str", "code: str",
        "referrer_identifier: str", "referrer_identifier_type: str", "user_identifier: str",
        "user_identifier_type: str", "referred_at_ms: int", "removed_at_ms: int",
    ],
    "ReversalRecord": [
        "type?: Literal['reversal']", "project_id: str", "id: str", "dedup_id: str", "reason: str", "fraction: str",
        "reversed_before: str", "reversed_after: str", "reversed_at_ms: int",
    ],
    "PayoutDecisionRecord": [
        "type?: Literal['payout_decision']", "project_id: str", "id: str", "payout_id: str", "decision: str",
        "reason?: str | None", "decided_at_ms: int", "payout?: dict",
    ],
}  # fmt: skip


def _type_name(annotation) -> str:
    return annotation.__name__ if isinstance(annotation, type) else str(annotation).replace("typing.", "")


def test_the_records_keep_their_published_fields():
    models = {model.__name__: model for model in get_args(AnyRecord)}
    described = {
        name: [f"{field}{'' if info.is_required() else '?'}: {_type_name(info.annotation)}"
               for field, info in model.model_fields.items()]
        for name, model in models.items()
    }  # fmt: skip
    assert described == {name: [*fields, "replay?: str"] for name, fields in PUBLISHED.items()}  # every record's
    assert [model.__module__ for model in models.values()] == ["schemas.records"] * len(PUBLISHED)
