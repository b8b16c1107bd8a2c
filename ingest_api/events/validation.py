"""Validation of conversion events (API.md §3), and of the published client's tracking events (§7), into the events
the ingest edge accepts: the shape of schemas.events, then the rules only Python knows (identifiers, timestamps,
amounts, nesting and size)."""

import re
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Annotated, Union, get_args, get_origin

import msgspec
import orjson
from annotated_types import MaxLen, MinLen
from pydantic import BaseModel, ValidationError

from rewards.domain.identifiers import InvalidIdentifier, canonical_identifier
from rewards.domain.limits import MAX_NESTING, LimitError, parse_amount, too_deep
from rewards.domain.payouts import User
from rewards.domain.timestamps import InvalidTimestamp, parse_time_ms
from rewards.web.errors import validation_messages
from schemas.events import MAX_EVENT_BYTES, BatchIn, EventIn, FuulEvent


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
    """Every event of the batch, or InvalidEvents naming each bad index.

    A batch is first taken at once (`_batch_at_once`: one call into msgspec for its shape, then the few checks
    only Python knows, each the cheapest that is exact); that path only ever accepts, never words an error.
    Anything it does not accept is checked by `_checked_batch`, which says what is wrong (or, rarely, accepts
    what the first path would not vouch for): the messages are its own, whatever the first path thought."""
    events = _batch_at_once(payload)
    return _checked_batch(payload) if events is None else events


def _checked_batch(payload: object) -> list[ValidEvent]:
    """The shape of the whole batch is checked in one call into pydantic's core (a call per event cost
    several times more); then what only Python knows (identifiers, timestamps, amounts) event by event.
    A batch that fails the first step is checked again event by event, to name every problem."""
    raw_events = payload.get("events") if isinstance(payload, dict) else None
    if isinstance(raw_events, list):
        _check_raw(raw_events)
    try:
        events = BatchIn.model_validate(payload).events
    except ValidationError as exc:
        if not _events_list(exc):
            raise InvalidEvents(validation_messages(exc)) from exc
        events = None
    messages: list[str] = []
    if events is None:
        valid = [_event_messages(raw, f"events[{index}]", messages) for index, raw in enumerate(raw_events)]
    else:
        valid = [_valid(event, f"events[{index}].", messages) for index, event in enumerate(events)]
    if messages:
        raise InvalidEvents(messages)
    return valid


def _events_list(exc: ValidationError) -> bool:
    """Whether every error lies inside an event (the batch itself is a list of 1 to 100 items)."""
    return all(_inside_an_event(error["loc"]) for error in exc.errors())


def _inside_an_event(loc: tuple) -> bool:
    return len(loc) >= 2 and loc[0] == "events" and isinstance(loc[1], int)


def _event_messages(raw: object, prefix: str, messages: list[str]) -> ValidEvent | None:
    try:
        event = EventIn.model_validate(raw)
    except ValidationError as exc:
        messages += validation_messages(exc, prefix)
        return None
    return _valid(event, f"{prefix}.", messages)


def validate_event(raw: object) -> ValidEvent:
    event = _event_at_once(raw)
    return _checked_event(raw) if event is None else event


def _single(model, raw: dict):
    """One event as sent, checked for depth and size first, then by `model`; InvalidEvents names every problem."""
    _check_raw([raw], single=True)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise InvalidEvents(validation_messages(exc)) from exc


def _checked_event(raw: object) -> ValidEvent:
    if not isinstance(raw, dict):
        raise InvalidEvents(["event must be an object"])
    event = _single(EventIn, raw)
    messages: list[str] = []
    valid = _valid(event, "", messages)
    if messages:
        raise InvalidEvents(messages)
    return valid


def _check_raw(raw_events: list, single: bool = False) -> None:
    """Depth, then size, of each event as sent: checked before anything walks the event recursively."""
    names = ["event" if single else f"events[{index}]" for index in range(len(raw_events))]
    too_nested = [
        f"{name}.{field} must not be nested deeper than {MAX_NESTING} levels"
        for name, raw in zip(names, raw_events, strict=True)
        if isinstance(raw, dict)
        for field, value in raw.items()
        if too_deep(value)
    ]
    if too_nested:
        raise InvalidEvents(too_nested)
    too_large = [
        f"{name} must not be larger than {MAX_EVENT_BYTES} bytes"
        for name, raw in zip(names, raw_events, strict=True)
        if isinstance(raw, dict) and len(orjson.dumps(raw)) > MAX_EVENT_BYTES
    ]
    if too_large:
        raise InvalidEvents(too_large)


def _valid(event: EventIn, dot: str, messages: list[str]) -> ValidEvent:
    """The event with its user's canonical identifier and its time in ms; each problem added to `messages`."""
    identifier, identifier_type = _user_of(event, dot, messages)
    _check_amounts(event.args, dot, messages)
    timestamp_ms = None
    if event.timestamp is not None:
        try:
            timestamp_ms = parse_time_ms(event.timestamp)
        except InvalidTimestamp as exc:
            messages.append(f"{dot}timestamp {exc}")
    return ValidEvent(
        name=event.name,
        dedup_id=event.dedup_id,
        user_identifier=identifier,
        user_identifier_type=identifier_type,
        timestamp_ms=timestamp_ms,
        args=event.args or {},
        metadata=event.metadata or {},
    )


def _check_amounts(args: dict | None, dot: str, messages: list[str]) -> None:
    for key in ("value", "revenue"):
        if args is None or key not in args:
            continue
        arg = args[key]
        if not isinstance(arg, dict) or "amount" not in arg:
            messages.append(f"{dot}args.{key} must be an object with an amount")
            continue
        try:
            parse_amount(arg["amount"])
        except LimitError as exc:
            messages.append(f"{dot}args.{key}.amount {exc}")


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


# -- taking a valid batch at once --------------------------------------------------------------------
#
# The same rules as above, each by the cheapest exact means; a batch is accepted here only if the checked path
# would accept it and make the very same events of it (tests/test_events_at_once.py holds the two paths equal
# on generated batches, valid and not). Anything else returns None, and the checked path answers. msgspec's
# shape check accepts nothing pydantic's refuses (the same strict types and lengths, in characters; it refuses
# some that pydantic takes, such as integers past 64 bits, which the checked path then takes). Its Structs are
# derived from the pydantic models, so the two shapes cannot drift apart.


def _struct_of(model: type[BaseModel]) -> type[msgspec.Struct]:
    """`model`'s shape as a msgspec Struct: the same fields, types, lengths (in characters, as pydantic counts them)
    and defaults, unknown fields refused. Any other constraint is refused here rather than dropped."""
    if model.model_config.get("extra") != "forbid":
        raise TypeError(f"{model.__name__}: only a model that forbids unknown fields has a Struct here")
    fields = []
    for name, info in model.model_fields.items():
        shape = _struct_type(info.annotation, info.metadata)
        fields.append((name, shape) if info.is_required() else (name, shape, info.default))
    return msgspec.defstruct(f"_{model.__name__}", fields, kw_only=True, forbid_unknown_fields=True)


def _struct_type(annotation: object, metadata: list = ()) -> object:
    lengths = {}
    for constraint in metadata:
        if isinstance(constraint, MinLen):
            lengths["min_length"] = constraint.min_length
        elif isinstance(constraint, MaxLen):
            lengths["max_length"] = constraint.max_length
        else:
            raise TypeError(f"no Struct form of the constraint {constraint!r}")
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        shape = _struct_of(annotation)
    elif get_origin(annotation) is list:
        shape = list[_struct_type(get_args(annotation)[0])]
    elif get_origin(annotation) in (Union, UnionType):
        shape = Union[tuple(_struct_type(arm) for arm in get_args(annotation))]  # noqa: UP007
    elif annotation in (str, int, dict, NoneType):
        shape = annotation
    else:
        raise TypeError(f"no Struct form of the type {annotation!r}")
    return Annotated[shape, msgspec.Meta(**lengths)] if lengths else shape


# The contract's shapes (pydantic's models: the checked path's messages) as msgspec Structs.
_Event = _struct_of(EventIn)
_Batch = _struct_of(BatchIn)


# Amounts parse_amount accepts without a doubt (at most 30 integer and 18 fractional digits, before any leading
# or trailing zeros are dropped); any other amount is asked of parse_amount itself.
_PLAIN_AMOUNT = re.compile(r"[0-9]{1,30}(?:\.[0-9]{1,18})?", re.ASCII)


def _batch_at_once(payload: object) -> list[ValidEvent] | None:
    raw_events = payload.get("events") if isinstance(payload, dict) else None
    if not isinstance(raw_events, list) or not _small_and_shallow(raw_events):
        return None
    try:
        events = msgspec.convert(payload, _Batch).events
    except msgspec.ValidationError:
        return None
    times: dict[str | int, int] = {}
    valid = [_valid_at_once(event, times) for event in events]
    return None if None in valid else valid


def _event_at_once(raw: object) -> ValidEvent | None:
    if not isinstance(raw, dict) or not _small_and_shallow([raw]):
        return None
    try:
        event = msgspec.convert(raw, _Event)
    except msgspec.ValidationError:
        return None
    return _valid_at_once(event, {})


def _small_and_shallow(raw_events: list) -> bool:
    """Every event an object of at most MAX_EVENT_BYTES, none of its fields nested deeper than MAX_NESTING: a
    field that deep holds more than MAX_NESTING opening brackets, so an event holding fewer (in its text,
    strings included) has none. Others (rare) are left to _check_raw's walk."""
    for raw in raw_events:
        if not isinstance(raw, dict):
            return False
        try:
            text = orjson.dumps(raw)
        except orjson.JSONEncodeError:
            return False
        if len(text) > MAX_EVENT_BYTES or text.count(b"{") + text.count(b"[") > MAX_NESTING:
            return False
    return True


def _valid_at_once(event: _Event, times: dict[str | int, int]) -> ValidEvent | None:
    """_valid's event if it finds no problem, else None. `times`: timestamps already parsed in the batch."""
    identifier, identifier_type = event.user_identifier, event.user_identifier_type
    if event.user is not None:
        identifier = identifier or event.user.identifier
        identifier_type = identifier_type or event.user.identifier_type
    if identifier is None or identifier_type is None:
        return None
    try:
        identifier = canonical_identifier(identifier, identifier_type)
    except InvalidIdentifier:
        return None
    args = event.args
    if args is not None:
        for key in ("value", "revenue"):
            if key not in args:
                continue
            arg = args[key]
            if not isinstance(arg, dict) or "amount" not in arg:
                return None
            amount = arg["amount"]
            if not (type(amount) is str and _PLAIN_AMOUNT.fullmatch(amount)):
                try:
                    parse_amount(amount)
                except LimitError:
                    return None
    timestamp_ms = None
    if event.timestamp is not None:
        timestamp_ms = times.get(event.timestamp)
        if timestamp_ms is None:
            try:
                timestamp_ms = times[event.timestamp] = parse_time_ms(event.timestamp)
            except InvalidTimestamp:
                return None
    return ValidEvent(
        name=event.name,
        dedup_id=event.dedup_id,
        user_identifier=identifier,
        user_identifier_type=identifier_type,
        timestamp_ms=timestamp_ms,
        args=args or {},
        metadata=event.metadata or {},
    )


# -- tracking events (API.md §7) -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrackingEvent:
    """A tracking event of the published client (POST /events without a dedup_id), valid."""

    name: str
    tracking_id: str
    user: User | None  # `user`, else §3's user fields, else `user_address` (an EVM address); None: none named
    args: dict  # as sent, but a bare `value` / `revenue` amount made §3's `{"amount": ...}`
    metadata: dict  # as sent
    signature: str | None
    signature_message: str | None
    signature_public_key: str | None
    account_chain_id: int | None
    project_ids: tuple[str, ...]  # the projects the body names (`project_id`, `metadata.project_id`)
    sent: dict  # the body as sent


def is_tracking_event(raw: object) -> bool:
    """A single event without a dedup_id is a tracking event (API.md §7); anything else is §3's."""
    return isinstance(raw, dict) and "dedup_id" not in raw


def validate_tracking_event(raw: dict) -> TrackingEvent:
    """The tracking event, or InvalidEvents naming every problem: the bounds of §3's events (depth, then size), the
    client's FuulEvent shape (schemas.events), its user's identifier and its amounts."""
    metadata = raw.get("metadata")
    if not isinstance(metadata, dict) or "tracking_id" not in metadata:
        raise InvalidEvents(["dedup_id is required, or metadata.tracking_id for a tracking event (API.md §7)"])
    event = _single(FuulEvent, raw)
    messages: list[str] = []
    user = _tracking_user(event, messages)
    args = _tracking_args(event.args or {}, messages)
    if messages:
        raise InvalidEvents(messages)
    named = (event.project_id, event.metadata.project_id)
    return TrackingEvent(
        name=event.name,
        tracking_id=event.metadata.tracking_id,
        user=user,
        args=args,
        metadata=metadata,
        signature=event.signature,
        signature_message=event.signature_message,
        signature_public_key=event.signature_public_key,
        account_chain_id=event.account_chain_id,
        project_ids=tuple(dict.fromkeys(p for p in named if p is not None)),
        sent=raw,
    )


def _tracking_user(event: FuulEvent, messages: list[str]) -> User | None:
    if event.user is not None:
        identifier, identifier_type, field = event.user.identifier, event.user.identifier_type, "user"
    elif event.user_identifier is not None or event.user_identifier_type is not None:
        identifier, identifier_type, field = event.user_identifier, event.user_identifier_type, "user_identifier"
        if identifier is None or identifier_type is None:
            messages.append(f"{'user_identifier' if identifier is None else 'user_identifier_type'} is required")
            return None
    elif event.user_address is not None:
        identifier, identifier_type, field = event.user_address, "evm_address", "user_address"
    else:
        return None
    try:
        return User(canonical_identifier(identifier, identifier_type), identifier_type)
    except InvalidIdentifier as exc:
        messages.append(f"{field}: {exc}")
        return None


def _tracking_args(args: dict, messages: list[str]) -> dict:
    """`args` with `value` and `revenue` checked as §3's amounts; a bare amount (a JSON number or a decimal string,
    as `sendEvent('purchase', {value: 10})` sends it) becomes `{"amount": <it>}`."""
    fixed = dict(args)
    for key in ("value", "revenue"):
        if key not in args:
            continue
        arg = args[key]
        if isinstance(arg, str | int | float) and not isinstance(arg, bool):
            fixed[key], amount, field = {"amount": arg}, arg, f"args.{key}"
        elif isinstance(arg, dict) and "amount" in arg:
            amount, field = arg["amount"], f"args.{key}.amount"
        else:
            messages.append(f"args.{key} must be an amount, or an object with an amount")
            continue
        try:
            parse_amount(amount)
        except LimitError as exc:
            messages.append(f"{field} {exc}")
    return fixed
