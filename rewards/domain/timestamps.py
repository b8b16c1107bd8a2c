"""Timestamps: requests give ISO 8601 or epoch ms; responses are ISO 8601 UTC with ms and `Z`."""

import time
from datetime import UTC, datetime, timedelta

from rewards.domain.limits import LimitError, check_time_ms

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FORMAT_ERROR = "must be an ISO 8601 timestamp or epoch milliseconds"
_MAX_MS_DIGITS = 20  # far past any time we hold; int() of a longer text only costs time


class InvalidTimestamp(ValueError):
    pass


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_timestamp_ms(value: object) -> int:
    """Any time ISO 8601 or epoch milliseconds can say (a query's bounds, clamped by the caller)."""
    if isinstance(value, bool):
        raise InvalidTimestamp(_FORMAT_ERROR)
    if isinstance(value, int):
        return value
    if isinstance(value, datetime):  # YAML documents (`rewards project config --file`) hold these
        return _exact_ms(value if value.tzinfo else value.replace(tzinfo=UTC))
    if not isinstance(value, str):
        raise InvalidTimestamp(_FORMAT_ERROR)
    if value.isascii() and value.isdigit():  # ASCII: str.isdigit() takes other scripts' digits too
        if len(value) > _MAX_MS_DIGITS:
            raise InvalidTimestamp(_FORMAT_ERROR)
        return int(value)
    try:
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return _exact_ms(parsed)
    except (ValueError, OverflowError) as exc:
        raise InvalidTimestamp(_FORMAT_ERROR) from exc


def parse_time_ms(value: object) -> int:
    """A time to be stored (an event's, a campaign's, a claim's): within API.md §3's limits."""
    try:
        return check_time_ms(parse_timestamp_ms(value))
    except LimitError as exc:
        raise InvalidTimestamp(str(exc)) from exc


def _exact_ms(parsed: datetime) -> int:
    # Integer arithmetic on the difference: timestamp() goes through a float, and fails before year 1 + offset.
    delta = parsed - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def format_timestamp(ms: int) -> str:
    m = _EPOCH + timedelta(milliseconds=ms)
    return f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}.{ms % 1000:03d}Z"
