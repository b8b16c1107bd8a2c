"""Timestamps: requests give ISO 8601 or epoch ms; responses are ISO 8601 UTC with ms and `Z`."""

import time
from datetime import UTC, datetime


class InvalidTimestamp(ValueError):
    pass


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_timestamp_ms(value: object) -> int:
    if isinstance(value, bool):
        raise InvalidTimestamp("must be an ISO 8601 timestamp or epoch milliseconds")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text)
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError as exc:
            raise InvalidTimestamp("must be an ISO 8601 timestamp or epoch milliseconds") from exc
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return _exact_ms(parsed)
    raise InvalidTimestamp("must be an ISO 8601 timestamp or epoch milliseconds")


def _exact_ms(parsed: datetime) -> int:
    # timestamp() goes through a float; rebuild from whole seconds to keep milliseconds exact.
    whole = parsed.replace(microsecond=0)
    return int(whole.timestamp()) * 1000 + parsed.microsecond // 1000


def format_timestamp(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC).replace(microsecond=(ms % 1000) * 1000)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
