"""Values as ClickHouse reads them in JSONEachRow rows and in query parameters."""

import functools
import time
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from typing import TypeVar


@functools.lru_cache(maxsize=65536)
def ch_datetime(ms: int) -> str:
    # Cached: a delivery's rows share few times (a batch's received time, a delivery's created time, events sent
    # together), and formatting them took ~15% of the workers' CPU.
    return f"{_second_text(ms // 1000)}.{ms % 1000:03d}"


@functools.lru_cache(maxsize=4096)
def _second_text(second: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(second))


# Query parameters. ClickHouse reads the value of a `{name:Type}` parameter as text in its *escaped* format
# (TabSeparated's), however it arrives (chdb's `params`, the HTTP interface's `param_<name>`). For a String that
# makes a backslash start an escape sequence (`\N` is NULL, read by a String as ''; `\x41` is 'A'; a lone final
# `\` is an error) and makes a tab or a newline end the value (an error: "not parsed completely"). An array is
# read as a literal, `['a','b']`, whose quoted elements take backslash escapes too. So every value is escaped
# exactly once on its way, or a client's text would reach the engine as something else, or break the query.
#
# chdb passes our text to the engine unchanged: `param_text` does it all. clickhouse-connect (1.12) does that last
# step itself when it binds server-side (`binding.format_bind_value`): a str is escaped (`escape_str`: backslash,
# quote, backquote, tab, newline) and a list becomes a literal of such escaped, quoted elements, the very rules of
# `param_text`. Given `param_text`'s output it would escape it a second time, so that adapter binds `param_value`,
# which adds only what clickhouse-connect lacks: it writes a tuple as a Tuple literal `(...)`, which no Array
# parameter accepts, and a bool as `True`, which UInt8 refuses. tests/schemas/test_escaping.py sends the same values
# through both adapters.


def param_value(value: object) -> object:
    """A query parameter before its text is escaped: arrays (list or tuple) as lists, bools as 1 or 0."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, list | tuple):
        return [param_value(item) for item in value]
    return value


def param_text(value: object) -> str:
    """A query parameter as the exact text ClickHouse parses it from (see above): for chdb."""
    value = param_value(value)
    if value is None:
        return "\\N"
    if isinstance(value, list):
        return _literal(value)
    return str(value).translate(_ESCAPED)


# What the escaped format reads specially in a value; any other character (quotes, \r, NUL, ...) stands for itself.
_ESCAPED = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n"})


def _literal(value: object) -> str:
    """A value as an element of an array literal."""
    if value is None:
        return "NULL"
    if isinstance(value, list):
        return "[" + ",".join(_literal(item) for item in value) + "]"
    if isinstance(value, int | float | Decimal):
        return str(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


# A ClickHouse server reads each query parameter as one HTTP form field of at most `http_max_field_value_size`
# (128 KiB by default; a server setting, which a query's own settings cannot raise): a delivery's 10,000 ids in
# one Array(String) parameter are refused ("Field value too long"). So a list that grows with the input goes in
# chunks, each well under that bound however its text is escaped.
PARAM_BYTES = 64 * 1024
T = TypeVar("T")


def param_cost(*texts: str) -> int:
    """What the texts take at most in Array(String) parameters: each as if every byte were escaped, plus its quotes
    and comma."""
    return sum(2 * len(text.encode()) + 3 for text in texts)


def param_chunks(
    values: Iterable[T], max_bytes: int = PARAM_BYTES, cost: Callable[[T], int] = param_cost
) -> Iterator[list[T]]:
    """`values` in order, cut into lists whose parameters' text stays under `max_bytes` (`cost`: what one value
    adds, over every parameter it goes into); never an empty list."""
    chunk: list[T] = []
    size = 0
    for value in values:
        value_cost = cost(value)
        if chunk and size + value_cost > max_bytes:
            yield chunk
            chunk, size = [], 0
        chunk.append(value)
        size += value_cost
    if chunk:
        yield chunk


DT = "DateTime64(3, 'UTC')"  # the type of every time column, as a query parameter names it


def time_window(
    column: str, start_ms: int | None, end_ms: int | None, params: dict, *, end_inclusive: bool = False
) -> list[str]:
    """The conditions that keep `column` within a window (`start_ms` inclusive; `end_ms` exclusive, or inclusive when
    `end_inclusive`; None: open), as `{start}`/`{end}` parameters added to `params`."""
    conditions = []
    if start_ms is not None:
        conditions.append(f"{column} >= {{start:{DT}}}")
        params["start"] = ch_datetime(start_ms)
    if end_ms is not None:
        conditions.append(f"{column} {'<=' if end_inclusive else '<'} {{end:{DT}}}")
        params["end"] = ch_datetime(end_ms)
    return conditions
