"""Conversion events as clients send them (API.md §3), and their validation into records."""

from dataclasses import dataclass

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rewards.clickhouse_values import MAX_MS, MIN_MS
from rewards.domain.amounts import InvalidAmount, parse_decimal
from rewards.domain.identifiers import InvalidIdentifier, canonical_identifier
from rewards.domain.timestamps import InvalidTimestamp, parse_timestamp_ms
from rewards.errors import validation_messages

MAX_EVENTS_PER_BATCH = 100
MAX_EVENT_BYTES = 16 * 1024


class NestedUser(BaseModel):
    model_config = ConfigDict(extra="forbid")
    identifier: str
    identifier_type: str


class EventIn(BaseModel):
    """One conversion event. Any other top-level field is refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1, max_length=128)
    dedup_id: str = Field(min_length=1, max_length=255)
    user_identifier: str | None = None
    user_identifier_type: str | None = None
    user: NestedUser | None = None
    timestamp: str | int | None = None
    args: dict | None = None
    metadata: dict | None = None

    @field_validator("args")
    @classmethod
    def _amounts_are_decimals(cls, args: dict | None) -> dict | None:
        for key in ("value", "revenue"):
            if args is None or key not in args:
                continue
            arg = args[key]
            if not isinstance(arg, dict) or "amount" not in arg:
                raise ValueError(f"{key} must be an object with an amount")
            try:
                parse_decimal(arg["amount"])
            except InvalidAmount as exc:
                raise ValueError(f"{key}.amount {exc}") from exc
        return args


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    events: list[dict] = Field(min_length=1, max_length=MAX_EVENTS_PER_BATCH)


@dataclass(frozen=True)
class ValidEvent:
    name: str
    dedup_id: str
    user_identifier: str
    user_identifier_type: str
    timestamp_ms: int | None
    args: dict
    metadata: dict


class InvalidEvents(ValueError):
    def __init__(self, messages: list[str]):
        super().__init__("; ".join(messages))
        self.messages = messages


def parse_json(body: bytes) -> object:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidEvents(["body must be valid JSON"]) from exc


def validate_batch(payload: object) -> list[ValidEvent]:
    """Every event of the batch, or InvalidEvents naming each bad index."""
    try:
        batch = BatchIn.model_validate(payload)
    except ValidationError as exc:
        raise InvalidEvents(validation_messages(exc)) from exc
    events, messages = [], []
    for index, raw in enumerate(batch.events):
        try:
            events.append(validate_event(raw, f"events[{index}]"))
        except InvalidEvents as exc:
            messages += exc.messages
    if messages:
        raise InvalidEvents(messages)
    return events


def validate_event(raw: object, prefix: str = "") -> ValidEvent:
    if not isinstance(raw, dict):
        raise InvalidEvents([f"{prefix or 'event'} must be an object"])
    if len(orjson.dumps(raw)) > MAX_EVENT_BYTES:
        raise InvalidEvents([f"{prefix or 'event'} must not be larger than {MAX_EVENT_BYTES} bytes"])
    try:
        event = EventIn.model_validate(raw)
    except ValidationError as exc:
        raise InvalidEvents(validation_messages(exc, prefix)) from exc
    dot = f"{prefix}." if prefix else ""
    messages: list[str] = []
    identifier, identifier_type = _user_of(event, dot, messages)
    timestamp_ms = None
    if event.timestamp is not None:
        try:
            timestamp_ms = parse_timestamp_ms(event.timestamp)
            if not MIN_MS <= timestamp_ms <= MAX_MS:
                raise InvalidTimestamp("must be between 1970-01-01 and 2299-12-31")
        except InvalidTimestamp as exc:
            messages.append(f"{dot}timestamp {exc}")
    if messages:
        raise InvalidEvents(messages)
    return ValidEvent(
        name=event.name,
        dedup_id=event.dedup_id,
        user_identifier=identifier,
        user_identifier_type=identifier_type,
        timestamp_ms=timestamp_ms,
        args=event.args or {},
        metadata=event.metadata or {},
    )


def _user_of(event: EventIn, dot: str, messages: list[str]) -> tuple[str, str]:
    identifier, identifier_type = event.user_identifier, event.user_identifier_type
    if event.user is not None:
        identifier = identifier or event.user.identifier
        identifier_type = identifier_type or event.user.identifier_type
    if identifier is None:
        messages.append(f"{dot}user_identifier is required")
    if identifier_type is None:
        messages.append(f"{dot}user_identifier_type is required")
    if identifier is None or identifier_type is None:
        return "", ""
    try:
        return canonical_identifier(identifier, identifier_type), identifier_type
    except InvalidIdentifier as exc:
        messages.append(f"{dot}{exc}")
        return "", ""
