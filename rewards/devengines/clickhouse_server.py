"""The real ClickHouse engine (chdb) serving HTTP: `python -m rewards.devengines.clickhouse_server --port P --data DIR`.

chdb opens its listener only inside a running query: `SYSTEM START LISTEN HTTP` followed by a statement
that keeps running for as long as the server must live. That statement sleeps a quarter second per row
of the endless system.numbers and aggregates, so it costs next to no CPU and produces no output. On SIGTERM or
SIGINT we cancel it over our own listener (KILL QUERY), the call returns and chdb shuts down normally
(exit status 0).
"""

import argparse
import os
import signal
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

import chdb._chdb

_MARK = "rewards_devengines_keepalive"
KEEPALIVE = (
    "SELECT count() FROM system.numbers WHERE NOT ignore(sleepEachRow(0.25)) "
    f"SETTINGS max_block_size = 1, log_comment = '{_MARK}'"
)
# keep_alive_timeout: once the keepalive query ends, chdb waits about 5 s for open client connections and then
# exits forcefully (status 1). Idle keep-alive connections close after this many seconds, so a stop with
# clients still connected (a pooled clickhouse-connect client) stays clean and takes at most ~2 s.
_CONFIG = """<clickhouse>
  <listen_host>127.0.0.1</listen_host>
  <http_port>{port}</http_port>
  <keep_alive_timeout>2</keep_alive_timeout>
</clickhouse>
"""


def _serve(data: Path, outcome: dict, done: threading.Event) -> None:
    try:
        # TabSeparated becomes the listener's default format: clickhouse-connect fails with any other.
        result = chdb._chdb.query(f"SYSTEM START LISTEN HTTP; {KEEPALIVE}", "TabSeparated", path=str(data))
        outcome["error"] = result.error_message() if result.has_error() else None
    except Exception as error:
        outcome["error"] = str(error)
    finally:
        done.set()


def _cancel_keepalive(port: int) -> None:
    kill = f"KILL QUERY WHERE query LIKE 'SELECT%{_MARK}%' SYNC"
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", data=kill.encode())
    urllib.request.urlopen(request, timeout=10).read()


def run(port: int, data: Path, work: Path) -> int:
    data.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    stop, done, outcome = threading.Event(), threading.Event(), {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # The listener reads config.xml from the working directory.
    (work / "config.xml").write_text(_CONFIG.format(port=port))
    os.chdir(work)
    threading.Thread(target=_serve, args=(data, outcome, done), daemon=True).start()
    while not done.is_set() and not stop.wait(0.2):
        pass
    if not done.is_set():
        _cancel_keepalive(port)
        done.wait(30)
    if stop.is_set():
        return 0
    reason = outcome.get("error") or "see chdb's message above"
    print(f"clickhouse server: the listener ended by itself: {reason}", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m rewards.devengines.clickhouse_server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--work", type=Path, help="for config.xml (default: a temporary directory)")
    args = parser.parse_args(argv)
    if args.work:
        return run(args.port, args.data.resolve(), args.work.resolve())
    with tempfile.TemporaryDirectory(prefix="chdb-server-") as work:
        return run(args.port, args.data.resolve(), Path(work))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
