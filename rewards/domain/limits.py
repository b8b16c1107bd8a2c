"""What the edge accepts (API.md §3 "Limits"), checked here and nowhere else, so that whatever is
accepted can be processed and stored: events and the payout configuration use the same checks.

- amounts and rates: non-negative plain decimals (ASCII digits, one optional point), below 10^30,
  with at most 18 fractional digits (the points' precision);
- timestamps: 1970-01-01T00:00:00.000Z to 2299-12-31T23:59:59.999Z (the warehouse's DateTime64 span);
- free-form objects (`args`, `metadata`): nested at most 32 levels.

Payouts multiply an amount by rates, so a payout can still exceed what the warehouse sums safely;
`PAYOUT_LIMIT` is that ceiling, checked by the workers (such a record is dead-lettered, not paid).
"""

import re
from decimal import Decimal

MAX_INTEGER_DIGITS = 30  # below 10^30
MAX_FRACTION_DIGITS = 18
MAX_NESTING = 32
MIN_MS = 0  # 1970-01-01T00:00:00.000Z
MAX_MS = 10_413_791_999_999  # 2299-12-31T23:59:59.999Z, the end of ClickHouse's DateTime64
TIME_RANGE = "between 1970-01-01T00:00:00.000Z and 2299-12-31T23:59:59.999Z"
# A payout of points (Decimal(76, 18): below 10^58) or of raw token units (UInt256: below 1.1e77) at
# most this large leaves room for 10^10 of them in any one sum before the warehouse's types overflow.
PAYOUT_LIMIT = Decimal(10) ** 48

# The plain decimal grammar, ASCII only (`\d` would take other scripts' digits; `$` would take a final
# newline: fullmatch is used). Leading zeros are harmless and accepted.
_PLAIN_DECIMAL = re.compile(r"(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?", re.ASCII)


class LimitError(ValueError):
    """A value outside the limits; the message completes a sentence naming the field."""


def parse_amount(value: object) -> Decimal:
    """An amount or rate from a JSON string or number, within the limits, or LimitError saying why."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise LimitError("must be a decimal string")
    text = repr(value) if isinstance(value, float) else str(value)
    match = _PLAIN_DECIMAL.fullmatch(text)
    if match is None or not (match["int"] or match["frac"]):
        raise LimitError(f"must be a plain non-negative decimal (digits and one optional point), not {_shown(text)}")
    integer = match["int"].lstrip("0")
    fraction = (match["frac"] or "").rstrip("0")
    if len(integer) > MAX_INTEGER_DIGITS:
        raise LimitError("must be below 10^30")
    if len(fraction) > MAX_FRACTION_DIGITS:
        raise LimitError(f"must have at most {MAX_FRACTION_DIGITS} fractional digits")
    return Decimal(text)


# API.md §8's durations: an integer and a unit, at most 3650 days.
_DURATION = re.compile(r"([1-9][0-9]{0,9})([smhd])", re.ASCII)
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_DURATION_MS = 3650 * _UNIT_MS["d"]


def parse_duration_ms(value: object) -> int:
    """A duration (`90d`, `12h`, `30m`, `45s`) in milliseconds, or LimitError saying why."""
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise LimitError("must be a positive integer followed by s, m, h or d (like 30d)")
    duration = int(match[1]) * _UNIT_MS[match[2]]
    if duration > MAX_DURATION_MS:
        raise LimitError("must be at most 3650 days")
    return duration


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "…")


# A value a list filter names (`?regions=EU,US`): commas separate values and blanks around them are
# dropped, so a value holding either could never be named; control characters are never meant.
_LABEL = re.compile(r"[^,\s\x00-\x1f\x7f-\x9f](?:[^,\x00-\x1f\x7f-\x9f]*[^,\s\x00-\x1f\x7f-\x9f])?")
LABEL_RULE = "must not contain commas or control characters, nor begin or end with a space"


def check_label(text: str) -> str:
    """A region, audience or tier id: something the listing's comma-separated filters can name."""
    if _LABEL.fullmatch(text) is None:
        raise LimitError(LABEL_RULE)
    return text


def check_time_ms(ms: int) -> int:
    if not MIN_MS <= ms <= MAX_MS:
        raise LimitError(f"must be {TIME_RANGE}")
    return ms


def clamp_time_ms(ms: int) -> int:
    """A bound of a query's window, moved inside the span no stored time lies outside of."""
    return min(max(ms, MIN_MS), MAX_MS)


def too_deep(value: object, limit: int = MAX_NESTING) -> bool:
    """Whether objects/arrays nest deeper than `limit` levels (the value itself is level 1).
    Iterative, and stops at the limit: a hostile depth costs no recursion and no more than the limit."""
    level = [(value, 1)]
    while level:
        item, depth = level.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        level.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
