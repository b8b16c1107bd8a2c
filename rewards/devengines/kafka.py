"""Apache Kafka 4.1.1 as local processes on 127.0.0.1: one KRaft node (broker + controller), or a cluster of them.

The runtime jars come from Maven Central through the machine's Maven, once, into a cache outside the
checkout; every later start reuses them.

`start_kafka(dir)`: one node, formatted `--standalone`. `start_kafka_cluster(dir, nodes=3)`: `nodes` nodes, each
broker and controller, with a static quorum of all of them (`controller.quorum.voters`), every data dir formatted
with one cluster id; internal topics replicated 3 times (fewer nodes: as many), `min.insync.replicas` 2, as a
production cluster has them. Each node keeps its ports and data across its stop/start (KRaft records the
controllers' endpoints), so a test can SIGKILL one (`cluster.nodes[i].kill()`) and start it again.
"""

import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rewards.devengines.process import Engine, EngineFailed, EngineUnavailable, file_lock, free_port, log, port_open

KAFKA_VERSION = "4.1.1"
# Kafka 4's POM leaves the slf4j → log4j2 bridge out: without it slf4j falls back to a no-op logger.
_POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.rewards</groupId><artifactId>kafka-runtime</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{KAFKA_VERSION}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>2.24.3</version></dependency>
  </dependencies>
</project>
"""
# Serial GC: on 2 cores G1's concurrent threads made the broker's start take 4-8 s instead of a steady 4 s.
_JVM_OPTIONS = ["-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
# A cluster's nodes share 2 cores and the memory with everything else: 320-380 MB of RSS each with this heap.
_CLUSTER_JVM_OPTIONS = ["-Xms128m", "-Xmx256m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
_LISTENERS = re.compile(r"^listeners=PLAINTEXT://127\.0\.0\.1:(\d+),CONTROLLER://127\.0\.0\.1:(\d+)$", re.M)


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rewards-engines" / f"kafka-{KAFKA_VERSION}"


def kafka_engine(work_dir: Path) -> Engine:
    """A broker on work_dir (not started): a second call on the same dir reuses its data and ports."""
    java, jars = _java(), runtime_jars()
    work_dir.mkdir(parents=True, exist_ok=True)
    port, controller_port = _ports(work_dir / "server.properties")
    (work_dir / "server.properties").write_text(_server_properties(work_dir, port, controller_port))
    (work_dir / "log4j2.properties").write_text(_log_config(work_dir / "kafka.log"))
    if not (work_dir / "data" / "meta.properties").exists():
        _format_storage(java, jars, work_dir, _cluster_id(), _JVM_OPTIONS, standalone=True)
    bootstrap = f"127.0.0.1:{port}"
    command = [java, *_JVM_OPTIONS, *_classpath(work_dir, jars), "kafka.Kafka", "server.properties"]
    return Engine("kafka", "KAFKA_BOOTSTRAP_SERVERS", bootstrap, command, work_dir, lambda: _ready(port, bootstrap))


def start_kafka(work_dir: Path) -> Engine:
    return kafka_engine(work_dir).start()


def runtime_jars() -> Path:
    return _cached_jars("lib", ".complete", _POM, "the Kafka jars")


# Kafka's own tools (the broker's jars do not include them): `org.apache.kafka.tools.ProducerPerformance` and the like.
_TOOLS_POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.rewards</groupId><artifactId>kafka-tools-runtime</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId>
      <version>{KAFKA_VERSION}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>2.24.3</version></dependency>
  </dependencies>
</project>
"""


def tools_classpath() -> str:
    """The classpath of Kafka's own tools (`org.apache.kafka:kafka-tools`), for `java -cp`: its jars and their
    runtime dependencies, fetched with Maven once into a cache beside the broker's."""
    return f"{_cached_jars('tools-lib', '.tools-complete', _TOOLS_POM, 'kafka-tools')}/*"


def _cached_jars(lib_name: str, marker: str, pom: str, what: str) -> Path:
    """The runtime jars of `pom` in the cache, fetched once (under a file lock shared by every fetch)."""
    cache = cache_dir()
    lib, complete = cache / lib_name, cache / marker
    if not complete.exists():
        with file_lock(cache / ".lock"):
            if not complete.exists():  # (or fetched by another process meanwhile)
                _fetch(lib, pom, what)
                complete.touch()
    return lib


def _fetch(lib: Path, pom: str, what: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise EngineUnavailable(f"kafka: Maven (mvn) not found on PATH, needed once to fetch {what}")
    log.warning("kafka: fetching %s (Kafka %s) with Maven into %s (first run only)", what, KAFKA_VERSION, lib)
    shutil.rmtree(lib, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "pom.xml").write_text(pom)
        goal = ["dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={lib}"]
        result = subprocess.run([mvn, "-q", "-B", "-f", f"{tmp}/pom.xml", *goal], capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(lib, ignore_errors=True)
        output = (result.stdout + result.stderr)[-2000:]
        raise EngineUnavailable(f"kafka: Maven could not fetch {what}:\n{output}")


def _java() -> str:
    java = shutil.which("java", path=f"{os.environ.get('JAVA_HOME', '')}/bin") or shutil.which("java")
    if java is None:
        raise EngineUnavailable("kafka: java (17+) not found on PATH or in JAVA_HOME")
    return java


def _ports(properties: Path) -> tuple[int, int]:
    # KRaft records the controller's endpoint when the storage is formatted: a restart must keep the ports.
    found = _LISTENERS.search(properties.read_text()) if properties.exists() else None
    return (int(found[1]), int(found[2])) if found else (free_port(), free_port())


def _server_properties(work_dir: Path, port: int, controller_port: int) -> str:
    settings = {
        **_node_settings(1, work_dir, port, controller_port),
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        **_replication_settings(replicas=1, min_insync=1),
    }
    return _properties(settings)


def _node_settings(node_id: int, work_dir: Path, port: int, controller_port: int) -> dict:
    return {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        # One partition each instead of 50: the first group join and first transaction come up in a moment.
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.num.partitions": 1,
        "group.initial.rebalance.delay.ms": 0,
        # Lets test workers (faust) ask for short sessions: they wait about half of one before the first assignment.
        "group.min.session.timeout.ms": 1000,
        "log.dirs": work_dir / "data",
    }


def _replication_settings(replicas: int, min_insync: int) -> dict:
    return {
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_insync,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_insync,
    }


def _properties(settings: dict) -> str:
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _log_config(log_file: Path) -> str:
    return f"""status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""


def _classpath(work_dir: Path, jars: Path) -> list[str]:
    return [f"-Dlog4j2.configurationFile={work_dir / 'log4j2.properties'}", "-cp", f"{jars}/*"]


def _cluster_id() -> str:
    """What `kafka-storage random-uuid` prints, without starting a JVM for it."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _format_storage(
    java: str, jars: Path, work_dir: Path, cluster_id: str, jvm_options: list[str], standalone: bool
) -> None:
    """Format the node's data dir: `standalone` for a lone node, else one of the voters in its properties."""
    quorum = ["--standalone"] if standalone else []
    tool = ["kafka.tools.StorageTool", "format", *quorum, "-t", cluster_id, "-c", "server.properties"]
    command = [java, *jvm_options, *_classpath(work_dir, jars), *tool]
    result = subprocess.run(command, cwd=work_dir, capture_output=True, text=True)
    if result.returncode != 0:
        raise EngineFailed(f"kafka: formatting the storage failed:\n{(result.stdout + result.stderr)[-2000:]}")


def _ready(port: int, bootstrap: str, node_id: int | None = None) -> bool:
    """The broker at `bootstrap` answers metadata listing a broker (`node_id`, when given: the node has joined
    its cluster, which lists only the brokers its controller has unfenced)."""
    # The cheap socket check first keeps the client from logging connection errors while the JVM boots.
    if not port_open(port):
        return False
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _has_broker(bootstrap, node_id)).result()


async def _has_broker(bootstrap: str, node_id: int | None) -> bool:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    try:
        await admin.start()
        brokers = [broker["node_id"] for broker in (await admin.describe_cluster())["brokers"]]
        return node_id in brokers if node_id is not None else bool(brokers)
    except (KafkaError, TimeoutError):  # (another node, down, may have been asked: the next probe asks again)
        return False
    finally:
        await admin.close()


# -- a cluster -------------------------------------------------------------------------------------------------


class KafkaCluster:
    """Handle on a local KRaft cluster: `url` is its bootstrap servers ("127.0.0.1:P1,127.0.0.1:P2,..."), and
    `nodes[i]` node i+1's Engine: `kill()` (SIGKILL, as a crash), `stop()` (SIGTERM), `start()` again on the
    same data and ports (it is ready once the cluster lists it again)."""

    env_name = "KAFKA_BOOTSTRAP_SERVERS"

    def __init__(self, nodes: list[Engine]):
        self.nodes = nodes
        self.url = ",".join(node.url for node in nodes)

    @property
    def env_line(self) -> str:
        return f"{self.env_name}={self.url}"

    @property
    def running(self) -> bool:
        return all(node.running for node in self.nodes)

    def start(self) -> "KafkaCluster":
        """Start every node not running, together: a node is ready only once a quorum of controllers is up."""
        stopped = [node for node in self.nodes if not node.running]
        with ThreadPoolExecutor(max(len(stopped), 1)) as pool:
            started = [pool.submit(node.start) for node in stopped]
        errors = [future.exception() for future in started if future.exception() is not None]
        if errors:
            self.stop()
            raise errors[0]
        return self

    def stop(self) -> None:
        """Stop every node, together (one by one, the last would wait for a quorum that has gone)."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(Engine.stop, self.nodes))

    def node_id(self, node: Engine) -> int:
        return self.nodes.index(node) + 1

    def active_controller(self) -> Engine:
        """The node leading the controller quorum, as the running nodes last recorded it (the quorum-state file
        each controller rewrites at every election)."""
        states = []
        for node in self.nodes:
            state_file = node.work_dir / "data" / "__cluster_metadata-0" / "quorum-state"
            if node.running and state_file.exists():
                state = json.loads(state_file.read_text())
                states.append((state["leaderEpoch"], state["leaderId"]))
        if not states or max(states)[1] < 1:
            raise EngineFailed("kafka: no running node knows the controller quorum's leader")
        return self.nodes[max(states)[1] - 1]


def kafka_cluster(work_dir: Path, nodes: int = 3) -> KafkaCluster:
    """A cluster of `nodes` nodes under work_dir/node-1... (not started): a second call on the same dir reuses
    their data and ports."""
    java, jars = _java(), runtime_jars()
    dirs = [work_dir / f"node-{node_id}" for node_id in range(1, nodes + 1)]
    ports = _cluster_ports([node_dir / "server.properties" for node_dir in dirs])
    voters = ",".join(f"{node_id}@127.0.0.1:{controller}" for node_id, (_, controller) in enumerate(ports, 1))
    engines = []
    for node_id, (node_dir, (port, controller_port)) in enumerate(zip(dirs, ports, strict=True), 1):
        node_dir.mkdir(parents=True, exist_ok=True)
        replicas = min(nodes, 3)
        settings = {
            **_node_settings(node_id, node_dir, port, controller_port),
            "controller.quorum.voters": voters,
            **_replication_settings(replicas, min_insync=min(replicas, 2)),
            "default.replication.factor": replicas,
            "min.insync.replicas": min(replicas, 2),
        }
        (node_dir / "server.properties").write_text(_properties(settings))
        engines.append(_cluster_node(java, jars, node_id, node_dir, port))
    _format_cluster(java, jars, dirs)
    return KafkaCluster(engines)


def start_kafka_cluster(work_dir: Path, nodes: int = 3) -> KafkaCluster:
    return kafka_cluster(work_dir, nodes).start()


def _cluster_node(java: str, jars: Path, node_id: int, node_dir: Path, port: int) -> Engine:
    name, bootstrap = f"kafka-{node_id}", f"127.0.0.1:{port}"
    (node_dir / "log4j2.properties").write_text(_log_config(node_dir / f"{name}.log"))  # the Engine's log
    command = [java, *_CLUSTER_JVM_OPTIONS, *_classpath(node_dir, jars), "kafka.Kafka", "server.properties"]
    ready = lambda: _ready(port, bootstrap, node_id)  # noqa: E731
    return Engine(name, "KAFKA_BOOTSTRAP_SERVERS", bootstrap, command, node_dir, ready)


def _cluster_ports(properties: list[Path]) -> list[tuple[int, int]]:
    """Each node's ports: those it was formatted with, else new ones, all different."""
    if all(path.exists() for path in properties):
        return [_ports(path) for path in properties]
    chosen: set[int] = set()
    while len(chosen) < 2 * len(properties):
        chosen.add(free_port())
    ports = sorted(chosen)
    return [(ports[2 * i], ports[2 * i + 1]) for i in range(len(properties))]


def _format_cluster(java: str, jars: Path, dirs: list[Path]) -> None:
    """Format the data dirs not formatted yet, with the cluster id of those that are (else a new one)."""
    metas = [node_dir / "data" / "meta.properties" for node_dir in dirs]
    found = [re.search(r"^cluster\.id=(\S+)$", meta.read_text(), re.M) for meta in metas if meta.exists()]
    cluster_id = next((match[1] for match in found if match), None) or _cluster_id()
    blank = [node_dir for node_dir, meta in zip(dirs, metas, strict=True) if not meta.exists()]
    with ThreadPoolExecutor(max(len(blank), 1)) as pool:
        formats = [
            pool.submit(_format_storage, java, jars, node_dir, cluster_id, _CLUSTER_JVM_OPTIONS, standalone=False)
            for node_dir in blank
        ]
    for future in formats:
        future.result()
