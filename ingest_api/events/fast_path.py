"""Taking a valid batch at once: the shape in one call into msgspec (its structs derived from schemas.events' models),
then the few checks only Python knows, each the cheapest that is exact. It only ever accepts; whatever it does not
vouch for goes to the checked path (ingest_api.events.validation), which words every error."""

import re
from types import NoneType, UnionType
from typing import Annotated, Union, get_args, get_origin

import msgspec
import orjson
from annotated_types import MaxLen, MinLen
from pydantic import BaseModel

from ingest_api.events.schemas import ValidEvent
from rewards.domain.identifiers import InvalidIdentifier, canonical_identifier
from rewards.domain.limits import MAX_NESTING, LimitError, parse_amount
from rewards.domain.timestamps import InvalidTimestamp, parse_time_ms
from schemas.events import MAX_EVENT_BYTES, BatchIn, EventIn

# -- --------------------------------------------------------------------
#
# The same rules as above, each by the cheapest exact means; a batch is accepted here only if the checked path
# would accept it and make the very same events of it (tests/ingest_api/test_events_at_once.py holds the two paths equal
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


def batch_at_once(payload: object) -> list[ValidEvent] | None:
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


def event_at_once(raw: object) -> ValidEvent | None:
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
