"""ClickHouse's engine (chdb) serving its HTTP interface on 127.0.0.1, in a process of its own."""

import sys
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from rewards.devengines.process import Engine, free_port


def clickhouse_engine(work_dir: Path) -> Engine:
    """A server on work_dir/data (not started); each start opens the same data."""
    work_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [sys.executable, "-m", "rewards.devengines.clickhouse_server", "--port", str(port)]
    command += ["--data", str(work_dir / "data"), "--work", str(work_dir / "server")]
    url = f"http://127.0.0.1:{port}"
    return Engine("clickhouse", "CLICKHOUSE_URL", url, command, work_dir, lambda: _pings(url))


def start_clickhouse(work_dir: Path) -> Engine:
    return clickhouse_engine(work_dir).start()


def _pings(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ping", timeout=1) as response:
            return response.read().strip() == b"Ok."
    except (urllib.error.URLError, OSError):
        return False


def connect(url: str, database: str | None = None):
    """A clickhouse-connect client for a CLICKHOUSE_URL ("http://[user:password@]host:port")."""
    import clickhouse_connect

    parts = urlsplit(url)
    return clickhouse_connect.get_client(
        host=parts.hostname,
        port=parts.port or 8123,
        username=parts.username,
        password=parts.password or "",
        database=database,
    )
