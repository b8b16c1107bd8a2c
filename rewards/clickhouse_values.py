"""Values as ClickHouse reads them in JSONEachRow rows and in query parameters."""

from datetime import UTC, datetime


def ch_datetime(ms: int) -> str:
    moment = datetime.fromtimestamp(ms // 1000, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S") + f".{ms % 1000:03d}"
