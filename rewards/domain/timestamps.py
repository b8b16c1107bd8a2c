"""Timestamps: requests give ISO 8601 or epoch ms; responses are ISO 8601 UTC with ms and `Z`."""

import re
import time
from datetime import UTC, date, datetime, timedelta

from rewards.domain.limits import LimitError, check_time_ms, clamp_time_ms

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FORMAT_ERROR = "must be an ISO 8601 timestamp or epoch milliseconds"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
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


# -- the time bounds of a read (a window's `from`/`to`) ---------------------------------------------------------------
# One rule for every read: ISO 8601 (a date, or a date and time) or epoch milliseconds; a date alone as an end bound
# takes in its whole day; any bound that parses is moved inside the span no stored time lies outside of
# (rewards.domain.limits.MIN_MS..MAX_MS), so "year 10000" means "all time from then on", never an error or an overflow.

BOUND_ERROR = "must be an ISO 8601 date or timestamp, or epoch milliseconds"
FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(2299, 12, 31)  # the days of MIN_MS and MAX_MS
DAY_MS = 86_400_000


def bound_ms(value: object, *, end: bool = False) -> int:
    """A window's bound in epoch ms, clamped (InvalidTimestamp when it does not parse)."""
    day = _date_only(value)
    if day is not None:
        ms = _exact_ms(datetime(day.year, day.month, day.day, tzinfo=UTC)) + (DAY_MS - 1 if end else 0)
    else:
        try:
            ms = parse_timestamp_ms(value)
        except InvalidTimestamp as exc:
            raise InvalidTimestamp(BOUND_ERROR) from exc
    return clamp_time_ms(ms)


def bound_day(value: object) -> date:
    """A window's bound as a UTC day, clamped (InvalidTimestamp when it does not parse)."""
    day = _date_only(value)
    if day is None:
        day = FIRST_DAY + timedelta(days=bound_ms(value) // DAY_MS)
    return min(max(day, FIRST_DAY), LAST_DAY)


def _date_only(value: object) -> date | None:
    if not isinstance(value, str) or not _DATE.fullmatch(value.strip()):
        return None
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        return None
