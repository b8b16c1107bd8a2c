"""Redis as a local process on 127.0.0.1, with its append-only file in a private directory; or a local Redis
Cluster of such processes (`start_redis_cluster`: 3 masters, no replicas, as ENGINES.md describes)."""

import os
import shutil
import subprocess
import time
from pathlib import Path

from rewards.devengines.process import Engine, EngineFailed, EngineUnavailable, file_lock, free_port, log

CLUSTER_SLOTS = 16384


def redis_server() -> str:
    found = shutil.which("redis-server")
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        with file_lock(Path("/tmp/rewards-engines-apt.lock")):
            found = shutil.which("redis-server") or _apt_install()
    if found is None:
        raise EngineUnavailable("redis: redis-server not found on PATH (apt-get install redis-server)")
    return found


def _apt_install() -> str | None:
    log.warning("redis: redis-server missing, installing it: apt-get update && apt-get install -y redis-server")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "redis-server"]):
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise EngineUnavailable(f"redis: {' '.join(command)} failed:\n{(result.stdout + result.stderr)[-2000:]}")
    return shutil.which("redis-server")


def redis_engine(work_dir: Path) -> Engine:
    server = redis_server()
    work_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes"]
    command += ["--dir", str(work_dir), "--daemonize", "no"]
    url = f"redis://127.0.0.1:{port}/0"
    return Engine("redis", "REDIS_URL", url, command, work_dir, lambda: _answers_ping(url))


def start_redis(work_dir: Path) -> Engine:
    return redis_engine(work_dir).start()


def _answers_ping(url: str) -> bool:
    import redis

    try:
        with redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1) as client:
            return client.ping()
    except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
        return False


class RedisClusterEngines:
    """A handle on a local Redis Cluster, shaped as the single node's Engine: `url` names one node (a cluster
    client finds the others), `stop()` stops every node and `start()` starts them again on the same data (each
    node's nodes.conf remembers the cluster)."""

    name = "redis-cluster"
    env_name = "REDIS_URL"

    def __init__(self, nodes: list[Engine], start_timeout: float = 60.0):
        self.nodes = nodes
        self.url = nodes[0].url
        self._start_timeout = start_timeout

    @property
    def env_line(self) -> str:
        return f"{self.env_name}={self.url}"

    @property
    def running(self) -> bool:
        return all(node.running for node in self.nodes)

    def start(self) -> "RedisClusterEngines":
        for node in self.nodes:
            node.start()
        self._wait_formed()
        return self

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()

    close = stop

    def restart(self) -> "RedisClusterEngines":
        self.stop()
        return self.start()

    def form(self) -> None:
        """Make the nodes (just started, empty) one cluster: each serves an equal range of slots."""
        import redis

        count = len(self.nodes)
        for number, node in enumerate(self.nodes):
            first, last = number * CLUSTER_SLOTS // count, (number + 1) * CLUSTER_SLOTS // count - 1
            with redis.Redis.from_url(node.url) as client:
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
                client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", number + 1)
        with redis.Redis.from_url(self.url) as first_node:
            for node in self.nodes[1:]:
                port, bus_port = node.command[node.command.index("--port") + 1], _bus_port(node)
                first_node.execute_command("CLUSTER", "MEET", "127.0.0.1", port, bus_port)
        self._wait_formed()

    def _wait_formed(self) -> None:
        """Until every node knows every other and sees every slot served."""
        deadline = time.monotonic() + self._start_timeout
        while not all(_cluster_ok(node.url, len(self.nodes)) for node in self.nodes):
            if time.monotonic() > deadline:
                tails = "\n".join(f"{node.log_path}:\n{node.log_tail(10)}" for node in self.nodes)
                raise EngineFailed(f"redis cluster not formed in {self._start_timeout:.0f} s\n{tails}")
            time.sleep(0.1)


def redis_cluster_engines(work_dir: Path, masters: int = 3) -> RedisClusterEngines:
    """The nodes of a local Redis Cluster (not started), each on free ports with a directory of its own."""
    server = redis_server()
    nodes = []
    for number in range(1, masters + 1):
        node_dir = work_dir / f"node-{number}"
        node_dir.mkdir(parents=True, exist_ok=True)
        # The cluster bus gets a port of its own (not port + 10000, which may be taken or past 65535).
        port, bus_port = free_port(), free_port()
        command = [server, "--port", str(port), "--cluster-port", str(bus_port), "--bind", "127.0.0.1"]
        command += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"]
        command += ["--save", "", "--appendonly", "yes", "--dir", str(node_dir), "--daemonize", "no"]
        url = f"redis://127.0.0.1:{port}/0"
        nodes.append(Engine(f"redis-{number}", "REDIS_URL", url, command, node_dir, lambda url=url: _answers_ping(url)))
    return RedisClusterEngines(nodes)


def start_redis_cluster(work_dir: Path, masters: int = 3) -> RedisClusterEngines:
    """A local Redis Cluster of `masters` masters (no replicas), formed and serving every slot; ~13 MB a node."""
    cluster = redis_cluster_engines(work_dir, masters)
    try:
        for node in cluster.nodes:
            node.start()
        cluster.form()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _bus_port(node: Engine) -> str:
    return node.command[node.command.index("--cluster-port") + 1]


def _cluster_ok(url: str, nodes: int) -> bool:
    import redis

    try:
        with redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1, decode_responses=True) as client:
            info = client.cluster("INFO")
    except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
        return False
    return (
        info.get("cluster_state") == "ok"
        and int(info.get("cluster_known_nodes", 0)) == nodes
        and int(info.get("cluster_slots_ok", 0)) == CLUSTER_SLOTS
    )
