"""The real ClickHouse engine (chdb) serving HTTP: `python -m rewards.devengines.clickhouse_server --port P --data DIR`.

chdb opens its listener only inside a running query: `SYSTEM START LISTEN HTTP` followed by a statement
that keeps running for as long as the server must live. That statement sleeps a quarter second per row
of the endless system.numbers and aggregates, so it costs next to no CPU and produces no output. On SIGTERM or
SIGINT we cancel it over our own listener (KILL QUERY), the call returns and chdb shuts down normally
(exit status 0).

A node of a local cluster (`--tcp-port`, `--cluster NAME --shard HOST:PORT ...`, see
rewards.devengines.clickhouse.start_clickhouse_cluster) also opens the native TCP listener, which the other
nodes' Distributed tables connect to, and names every shard in `<remote_servers>` (one replica each).
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
  <keep_alive_timeout>2</keep_alive_timeout>{cluster}
</clickhouse>
"""
_CLUSTER = """
  <tcp_port>{tcp_port}</tcp_port>
  <remote_servers>
    <{name}>{shards}
    </{name}>
  </remote_servers>"""
_SHARD = """
      <shard><replica><host>{host}</host><port>{port}</port></replica></shard>"""


def config(port: int, tcp_port: int | None = None, cluster: str | None = None, shards: list[str] = ()) -> str:
    """config.xml: the HTTP listener; for a cluster's node, the TCP listener and the cluster's shards too."""
    if tcp_port is None:
        return _CONFIG.format(port=port, cluster="")
    shard_lines = "".join(_SHARD.format(host=s.rsplit(":", 1)[0], port=s.rsplit(":", 1)[1]) for s in shards)
    return _CONFIG.format(port=port, cluster=_CLUSTER.format(tcp_port=tcp_port, name=cluster, shards=shard_lines))


def _serve(data: Path, listen: str, outcome: dict, done: threading.Event) -> None:
    try:
        # TabSeparated becomes the listener's default format: clickhouse-connect fails with any other.
        result = chdb._chdb.query(f"{listen} {KEEPALIVE}", "TabSeparated", path=str(data))
        outcome["error"] = result.error_message() if result.has_error() else None
    except Exception as error:
        outcome["error"] = str(error)
    finally:
        done.set()


def _cancel_keepalive(port: int) -> None:
    kill = f"KILL QUERY WHERE query LIKE 'SELECT%{_MARK}%' SYNC"
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", data=kill.encode())
    urllib.request.urlopen(request, timeout=10).read()


def run(port: int, data: Path, work: Path, node_config: str | None = None) -> int:
    data.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    stop, done, outcome = threading.Event(), threading.Event(), {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # The listener reads config.xml from the working directory.
    (work / "config.xml").write_text(node_config or config(port))
    os.chdir(work)
    # A cluster's node listens on TCP first: once HTTP answers (the readiness probe), both do.
    listen = ("SYSTEM START LISTEN TCP; " if node_config else "") + "SYSTEM START LISTEN HTTP;"
    threading.Thread(target=_serve, args=(data, listen, outcome, done), daemon=True).start()
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
    parser.add_argument("--tcp-port", type=int, help="a cluster's node: the native listener's port")
    parser.add_argument("--cluster", help="a cluster's node: the cluster's name in <remote_servers>")
    parser.add_argument("--shard", action="append", default=[], help="a cluster's node: HOST:TCP_PORT of each shard")
    args = parser.parse_args(argv)
    node_config = None
    if args.tcp_port is not None:
        if not args.cluster or not args.shard:
            parser.error("--tcp-port goes with --cluster and a --shard for each shard")
        node_config = config(args.port, args.tcp_port, args.cluster, args.shard)
    if args.work:
        return run(args.port, args.data.resolve(), args.work.resolve(), node_config)
    with tempfile.TemporaryDirectory(prefix="chdb-server-") as work:
        return run(args.port, args.data.resolve(), Path(work), node_config)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
