"""The time bounds of a read's query (`from`, `to`, `dateFrom`, ...): rewards.domain.timestamps' one rule, and one
400 for a bound that does not parse, whatever the endpoint."""

from datetime import date

from rewards.domain.timestamps import InvalidTimestamp, bound_day, bound_ms
from rewards.web.errors import bad_request


def time_bound(name: str, text: str | None, *, end: bool = False) -> int | None:
    """The bound in epoch ms (a date alone as an `end` bound: its whole day), clamped; None when not given."""
    if text is None:
        return None
    try:
        return bound_ms(text, end=end)
    except InvalidTimestamp as exc:
        raise bad_request(f"{name} {exc}") from exc


def time_window(
    names: tuple[str, str], start: str | None, end: str | None, *, end_inclusive: bool = False
) -> tuple[int | None, int | None]:
    """A read's two bounds in epoch ms (`end_inclusive`: a date alone as the end takes in its whole day), or one 400
    when one does not parse or the first is after the second."""
    start_ms, end_ms = time_bound(names[0], start), time_bound(names[1], end, end=end_inclusive)
    if None not in (start_ms, end_ms) and start_ms > end_ms:
        raise bad_request(f"{names[0]} must not be after {names[1]}")
    return start_ms, end_ms


def day_bound(name: str, text: str | None) -> date | None:
    """The bound as a UTC day, clamped; None when not given."""
    if text is None:
        return None
    try:
        return bound_day(text)
    except InvalidTimestamp as exc:
        raise bad_request(f"{name} {exc}") from exc
