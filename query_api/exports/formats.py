"""An export's pages of rows written as CSV, NDJSON or Parquet, a page at a time (bytes out as each page is in).

Amounts stay exact in each: decimal text in CSV and NDJSON (a JSON number would be read as a float), Decimal(76, 18)
in Parquet. Times are ISO 8601 text in CSV and NDJSON, UTC timestamps in milliseconds in Parquet.
"""

import csv
import io
from collections.abc import AsyncIterator, Callable

import orjson

from query_api.exports.service import text_fields

MEDIA_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "ndjson": "application/x-ndjson",
    "parquet": "application/vnd.apache.parquet",
}
JSON_TEXT_COLUMNS = ("args", "metadata")  # JSON texts: NDJSON carries them as JSON values, the others as text


def _parquet_type(column: str):
    import pyarrow as pa

    types = {
        "level": pa.int64(), "currency_chain_id": pa.int64(), "currency_decimals": pa.int64(),
        "amount": pa.decimal256(76, 18), "event_time": pa.timestamp("ms", tz="UTC"),
        "processed_at": pa.timestamp("ms", tz="UTC"), "received_at": pa.timestamp("ms", tz="UTC"),
    }  # fmt: skip
    return types.get(column, pa.string())


Pages = AsyncIterator[list[dict]]


async def csv_bytes(columns: tuple[str, ...], pages: Pages) -> AsyncIterator[bytes]:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    yield buffer.getvalue().encode()
    async for page in pages:
        buffer.seek(0)
        buffer.truncate()
        writer.writerows(map(text_fields, page))
        yield buffer.getvalue().encode()


async def ndjson_bytes(columns: tuple[str, ...], pages: Pages) -> AsyncIterator[bytes]:
    async for page in pages:
        lines = []
        for row in map(text_fields, page):
            for name in JSON_TEXT_COLUMNS:
                if name in row:  # as received: valid JSON, written in without a parse
                    row[name] = orjson.Fragment(row[name])
            lines.append(orjson.dumps(row))
        yield b"\n".join(lines) + b"\n"


class _Chunks(io.RawIOBase):
    """Where the Parquet writer writes: what it wrote is taken after each page."""

    def __init__(self):
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        taken, self._parts = b"".join(self._parts), []
        return taken


async def parquet_bytes(columns: tuple[str, ...], pages: Pages) -> AsyncIterator[bytes]:
    """One Parquet file, a row group per page."""
    import pyarrow as pa  # imported when first needed: ~0.2 s of every query process's start otherwise
    import pyarrow.parquet as pq

    schema = pa.schema([(name, _parquet_type(name)) for name in columns])
    sink = _Chunks()
    writer = pq.ParquetWriter(sink, schema, compression="zstd")
    try:
        async for page in pages:
            writer.write_table(pa.table({name: [row[name] for row in page] for name in columns}, schema=schema))
            yield sink.take()
    finally:
        writer.close()
    yield sink.take()


WRITERS: dict[str, Callable[[tuple[str, ...], Pages], AsyncIterator[bytes]]] = {
    "csv": csv_bytes,
    "ndjson": ndjson_bytes,
    "parquet": parquet_bytes,
}
