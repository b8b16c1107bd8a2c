"""ClickHouse's engine (chdb) serving its HTTP interface on 127.0.0.1, in a process of its own; or a local cluster
of such processes, one per shard (start_clickhouse_cluster)."""

import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

from rewards.devengines.process import Engine, free_port, port_open

DEFAULT_CLUSTER = "rewards"


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


class ClickHouseCluster:
    """A handle on a local ClickHouse cluster, shaped as the single node's Engine: one chdb server per shard (no
    replicas: chdb cannot replicate, see ../shared/ENGINES.md), each naming every shard in its <remote_servers>
    under `cluster`. `url` is the first node's (any node serves the whole warehouse through its Distributed
    tables), `urls` every node's; `stop()` and `start()` keep each node's data."""

    name = "clickhouse-cluster"
    env_name = "CLICKHOUSE_URL"

    def __init__(self, nodes: list[Engine], cluster: str):
        self.nodes = nodes
        self.cluster = cluster
        self.url = nodes[0].url

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    @property
    def env(self) -> dict[str, str]:
        """The production processes' environment for it (rewards.settings): `rewards migrate` needs every node."""
        return {"CLICKHOUSE_URL": self.url, "REWARDS_CLICKHOUSE_CLUSTER": self.cluster,
                "REWARDS_CLICKHOUSE_NODES": ",".join(self.urls)}  # fmt: skip

    @property
    def env_line(self) -> str:
        """One NAME=value line per variable."""
        return "\n".join(f"{name}={value}" for name, value in self.env.items())

    @property
    def running(self) -> bool:
        return all(node.running for node in self.nodes)

    def start(self) -> "ClickHouseCluster":
        try:
            for node in self.nodes:
                node.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Every node at once: a node that a peer's Distributed connections still reach shuts down only after
        chdb's ~5 s wait for open connections (then exits with status 1, its data intact), so one after the other
        would add those seconds up."""
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            list(pool.map(Engine.stop, self.nodes))

    close = stop

    def restart(self) -> "ClickHouseCluster":
        self.stop()
        return self.start()


def clickhouse_cluster(work_dir: Path, shards: int = 2, cluster: str = DEFAULT_CLUSTER) -> ClickHouseCluster:
    """The nodes of a local cluster (not started), each on free ports with a directory of its own."""
    ports = [(free_port(), free_port()) for _ in range(shards)]  # (http, tcp) of each node
    shard_args = [arg for _, tcp in ports for arg in ("--shard", f"127.0.0.1:{tcp}")]
    nodes = []
    for number, (port, tcp_port) in enumerate(ports, start=1):
        node_dir = work_dir / f"shard-{number}"
        node_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "rewards.devengines.clickhouse_server", "--port", str(port)]
        command += ["--data", str(node_dir / "data"), "--work", str(node_dir / "server"), "--tcp-port", str(tcp_port)]
        command += ["--cluster", cluster, *shard_args]
        url = f"http://127.0.0.1:{port}"
        ready = lambda url=url, tcp_port=tcp_port: _pings(url) and port_open(tcp_port)  # noqa: E731
        nodes.append(Engine(f"clickhouse-{number}", "CLICKHOUSE_URL", url, command, node_dir, ready))
    return ClickHouseCluster(nodes, cluster)


def start_clickhouse_cluster(work_dir: Path, shards: int = 2, cluster: str = DEFAULT_CLUSTER) -> ClickHouseCluster:
    """A local ClickHouse cluster of `shards` chdb servers (HTTP and TCP on 127.0.0.1), ~350 MB each."""
    return clickhouse_cluster(work_dir, shards, cluster).start()


def _pings(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ping", timeout=1) as response:
            return response.read().strip() == b"Ok."
    except (urllib.error.URLError, OSError):
        return False


def connect(url: str, database: str | None = None):
    """A clickhouse-connect client for a CLICKHOUSE_URL ("http://[user:password@]host:port[/database]")."""
    import clickhouse_connect

    parts = urlsplit(url)
    return clickhouse_connect.get_client(
        host=parts.hostname,
        port=parts.port or 8123,
        username=parts.username,
        password=parts.password or "",
        database=database or parts.path.strip("/") or None,
    )
