"""Records on the event log (Kafka topic `rewards.events`, or the embedded outbox).

These are a published contract for downstream consumers: add optional fields, never change
or remove one. Serialized as JSON; amounts are decimal strings, times epoch milliseconds. The fields of
each record are those of its entity in schemas/entities.py.
"""

from dataclasses import dataclass
from typing import Annotated, Literal

import orjson
from pydantic import BaseModel, Field, TypeAdapter, create_model

from schemas.entities import (
    AFFILIATE,
    CLAIM_CHECK,
    CODE_USE,
    CODES_CREATED,
    CONVERSION,
    PAYOUT_DECISION,
    REFERRAL_REMOVAL,
    REVERSAL,
    TRACKING_EVENT,
    Entity,
    compiled,
)

# Every record's besides its entity's fields: set on a record an operator replayed from the dead letters (`rewards
# dead-letters replay`), the dead letter's id; the workers write such a record once under that id (a replay run twice
# writes it once), as they write the others once under their own. Written only when set (dump_records).
REPLAY = "replay"


def _record_model(entity: Entity) -> type[BaseModel]:
    """The record of `entity`: its `type`, then its fields in the order declared (the order they are written in),
    then `replay`."""
    fields = {field.name: (field.type, field.default) for field in entity.fields}
    return create_model(
        entity.record_name,
        __doc__=entity.doc,
        __module__=__name__,
        type=(Literal[entity.type], entity.type),
        **fields,
        **{REPLAY: (str, "")},
    )


# The fields of each: schemas/entities.py.
ConversionRecord = _record_model(CONVERSION)
CodeUseRecord = _record_model(CODE_USE)
CodesCreatedRecord = _record_model(CODES_CREATED)
AffiliateRecord = _record_model(AFFILIATE)
ClaimCheckRecord = _record_model(CLAIM_CHECK)
TrackingEventRecord = _record_model(TRACKING_EVENT)
ReferralRemovedRecord = _record_model(REFERRAL_REMOVAL)
ReversalRecord = _record_model(REVERSAL)
PayoutDecisionRecord = _record_model(PAYOUT_DECISION)


AnyRecord = (
    ConversionRecord
    | CodeUseRecord
    | CodesCreatedRecord
    | AffiliateRecord
    | ClaimCheckRecord
    | TrackingEventRecord
    | ReferralRemovedRecord
    | ReversalRecord
    | PayoutDecisionRecord
)
Record = Annotated[AnyRecord, Field(discriminator="type")]
_records = TypeAdapter(list[Record])
_record = TypeAdapter(Record)


def dump_records(records: list[AnyRecord]) -> bytes:
    # Every field of a record is a JSON value already (str, int, None, and dicts and lists of those), so a
    # record's field dict serializes as its model would; orjson does it ~10x faster than pydantic's
    # serializer of this union (a hot path: every accepted batch). tests/schemas/test_records.py holds them equal.
    return orjson.dumps([_fields(record) for record in records])


def _fields(record: AnyRecord) -> dict:
    fields = record.__dict__
    return fields if fields[REPLAY] else {name: value for name, value in fields.items() if name != REPLAY}


# What dump_conversions takes from the batch rather than from each event.
_FROM_THE_BATCH = ("project_id", "batch_id", "received_ms")


def _conversion_value(name: str) -> str:
    if name in _FROM_THE_BATCH:
        return name
    if name == "timestamp_ms":  # an event sent without a time happened when it was received
        return "received_ms if e.timestamp_ms is None else e.timestamp_ms"
    return f"e.{name}"


def _conversion_items() -> str:
    values = [f"{field.name!r}: {_conversion_value(field.name)}" for field in CONVERSION.fields]
    return ", ".join([f"'type': {CONVERSION.type!r}", *values])


# Each event's record as a dict literal, compiled from CONVERSION's fields.
_conversions = compiled(
    "conversions(project_id, batch_id, received_ms, events)", f"[{{{_conversion_items()}}} for e in events]", {}
)


def dump_conversions(project_id: str, batch_id: str, received_ms: int, events: list) -> bytes:
    """What dump_records writes for these events' ConversionRecords, without building the models (the
    hottest path of ingest: building them cost as much as validating the batch). `events`: any objects with the
    record's other fields as attributes (ingest_api.events.schemas.ValidEvent); tests/schemas/test_records.py holds
    the two equal."""
    return orjson.dumps(_conversions(project_id, batch_id, received_ms, events))


def load_records(payload: bytes) -> list[AnyRecord]:
    return _records.validate_json(payload)


def load_record(payload: bytes | str) -> AnyRecord:
    """One record's JSON object (a dead letter's payload); raises ValueError when it is not a record."""
    return _record.validate_json(payload)


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
