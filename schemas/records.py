"""Records on the event log (Kafka topic `rewards.events`, or the embedded outbox).

These are a published contract for downstream consumers: add optional fields, never change
or remove one. Serialized as JSON; amounts are decimal strings, times epoch milliseconds.
"""

from dataclasses import dataclass
from typing import Annotated, Literal

import orjson
from pydantic import BaseModel, Field, TypeAdapter


class ConversionRecord(BaseModel):
    type: Literal["conversion"] = "conversion"
    project_id: str
    batch_id: str
    dedup_id: str
    name: str
    user_identifier: str
    user_identifier_type: str
    timestamp_ms: int
    received_ms: int
    args: dict = {}
    metadata: dict = {}


class CodeUseRecord(BaseModel):
    type: Literal["code_use"] = "code_use"
    project_id: str
    use_id: str
    code: str
    owner_identifier: str
    owner_identifier_type: str
    user_identifier: str
    user_identifier_type: str
    used_at_ms: int
    max_uses: int | None = None  # the code's limit when used: the workers refuse a use past it (absent: none)


class CodesCreatedRecord(BaseModel):
    """Referral codes created for an owner (the affiliate listing searches them)."""

    type: Literal["codes_created"] = "codes_created"
    project_id: str
    codes: list[str]
    owner_identifier: str
    owner_identifier_type: str
    created_at_ms: int


class AffiliateRecord(BaseModel):
    type: Literal["affiliate"] = "affiliate"
    project_id: str
    id: str
    user_identifier: str
    user_identifier_type: str
    name: str | None = None
    status: str
    region: str | None = None
    audience: str | None = None
    tax_status: str
    tier: str | None = None
    created_at_ms: int


class ClaimCheckRecord(BaseModel):
    """The whole state of a claim check after a change (closed, claimed); `version` orders the changes."""

    type: Literal["claim_check"] = "claim_check"
    project_id: str
    id: str
    user_identifier: str
    user_identifier_type: str
    currency_address: str
    currency_chain_id: int
    currency_name: str
    currency_decimals: int
    amount: str  # raw integer in the token's smallest unit
    reason: str  # affiliate_payout | end_user_payout
    status: str  # open | closed | claimed
    hash: str | None = None
    source_id: str
    created_at_ms: int
    claimed_at_ms: int | None = None
    version: int


AnyRecord = ConversionRecord | CodeUseRecord | CodesCreatedRecord | AffiliateRecord | ClaimCheckRecord
Record = Annotated[AnyRecord, Field(discriminator="type")]
_records = TypeAdapter(list[Record])
_record = TypeAdapter(Record)


def dump_records(records: list[AnyRecord]) -> bytes:
    # Every field of a record is a JSON value already (str, int, None, and dicts and lists of those), so a
    # record's field dict serializes as its model would; orjson does it ~10x faster than pydantic's
    # serializer of this union (a hot path: every accepted batch). tests/test_records.py holds them equal.
    return orjson.dumps([record.__dict__ for record in records])


def dump_conversions(project_id: str, batch_id: str, received_ms: int, events: list) -> bytes:
    """What dump_records writes for these events' ConversionRecords, without building the models (the
    hottest path of ingest: building them cost as much as validating the batch). `events` are
    schemas.events.ValidEvent; tests/test_records.py holds the two equal."""
    return orjson.dumps(
        [
            {
                "type": "conversion", "project_id": project_id, "batch_id": batch_id, "dedup_id": e.dedup_id,
                "name": e.name, "user_identifier": e.user_identifier, "user_identifier_type": e.user_identifier_type,
                "timestamp_ms": received_ms if e.timestamp_ms is None else e.timestamp_ms,
                "received_ms": received_ms, "args": e.args, "metadata": e.metadata,
            }
            for e in events
        ]
    )  # fmt: skip


def load_records(payload: bytes) -> list[AnyRecord]:
    return _records.validate_json(payload)


@dataclass(frozen=True)
class Undecodable:
    """A message, or one item of a message, that is not a record of this contract. Never retried: the
    workers set it aside as a dead letter, with the text and the reason."""

    payload: bytes
    reason: str
    project_id: str = ""


def decode_message(payload: bytes) -> list[AnyRecord | Undecodable]:
    """The records of one message; what cannot be read stands in its place as Undecodable. A message
    that fails as a whole is read again item by item, so one bad item costs only itself."""
    try:
        return _records.validate_json(payload)
    except Exception:  # any way the fast path fails (pydantic's errors, its JSON depth limit) is retried below
        pass
    try:
        items = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        return [Undecodable(payload, f"not JSON: {exc}")]
    if not isinstance(items, list):
        return [Undecodable(payload, "not a JSON array of records")]
    return [_decode_item(item) for item in items]


def _decode_item(item: object) -> AnyRecord | Undecodable:
    try:
        return _record.validate_python(item)
    except Exception as exc:
        project_id = item.get("project_id") if isinstance(item, dict) else None
        return Undecodable(
            _text(item), f"not a record: {exc}"[:1000], project_id if isinstance(project_id, str) else ""
        )


def _text(item: object) -> bytes:
    try:
        return orjson.dumps(item)
    except TypeError:  # nested deeper than orjson writes
        pass
    try:
        return repr(item).encode()
    except RecursionError:
        return b""
