"""Validation of conversion events (API.md §3) into the events the ingest edge accepts: the shape of schemas.events,
then the rules only Python knows (identifiers, timestamps, amounts, nesting and size). A batch is taken at once by
ingest_api.events.fast_path when it can vouch for it; this checked path words every error. (Tracking events:
ingest_api.events.tracking_validation.)"""

import orjson
from pydantic import ValidationError

from ingest_api.events.fast_path import batch_at_once, event_at_once
from ingest_api.events.schemas import InvalidEvents, ValidEvent
from rewards.domain.identifiers import InvalidIdentifier, canonical_identifier
from rewards.domain.limits import MAX_NESTING, LimitError, parse_amount, too_deep
from rewards.domain.timestamps import InvalidTimestamp, parse_time_ms
from rewards.web.errors import validation_messages
from schemas.events import MAX_EVENT_BYTES, BatchIn, EventIn


def parse_json(body: bytes) -> object:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidEvents(["body must be valid JSON"]) from exc


def validate_batch(payload: object) -> list[ValidEvent]:
    """Every event of the batch, or InvalidEvents naming each bad index.

    A batch is first taken at once (`fast_path.batch_at_once`: one call into msgspec for its shape, then the few checks
    only Python knows, each the cheapest that is exact); that path only ever accepts, never words an error.
    Anything it does not accept is checked by `_checked_batch`, which says what is wrong (or, rarely, accepts
    what the first path would not vouch for): the messages are its own, whatever the first path thought."""
    events = batch_at_once(payload)
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
    event = event_at_once(raw)
    return _checked_event(raw) if event is None else event


def single_event(model, raw: dict):
    """One event as sent, checked for depth and size first, then by `model`; InvalidEvents names every problem."""
    _check_raw([raw], single=True)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise InvalidEvents(validation_messages(exc)) from exc


def _checked_event(raw: object) -> ValidEvent:
    if not isinstance(raw, dict):
        raise InvalidEvents(["event must be an object"])
    event = single_event(EventIn, raw)
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
