"""Values as ClickHouse reads them in JSONEachRow rows and in query parameters."""

import functools
import time

# The span of ClickHouse DateTime64 values we use: 1970-01-01 up to the type's end, 2299-12-31T23:59:59.999Z.
MIN_MS = 0
MAX_MS = 10_413_791_999_999


def ch_datetime(ms: int) -> str:
    return f"{_second_text(ms // 1000)}.{ms % 1000:03d}"


@functools.lru_cache(maxsize=4096)
def _second_text(second: int) -> str:
    # Cached: the rows of a delivery share a few seconds, and formatting took ~15% of the workers' CPU.
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(second))


def param_text(value: object) -> object:
    """A query parameter as ClickHouse parses it from text: arrays as quoted literals, the rest unchanged."""
    if isinstance(value, list | tuple):
        return "[" + ",".join(str(item) if isinstance(item, int) else _quoted(str(item)) for item in value) + "]"
    return value


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
