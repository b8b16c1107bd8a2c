"""Apache Kafka 4.1.1 as a local process: one KRaft node (broker + controller) on 127.0.0.1.

The runtime jars come from Maven Central through the machine's Maven, once, into a cache outside the
checkout; every later start reuses them.
"""

import asyncio
import base64
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
        _format_storage(java, jars, work_dir)
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
        "process.roles": "broker,controller",
        "node.id": 1,
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        # One partition each instead of 50: the first group join and first transaction come up in a moment.
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.num.partitions": 1,
        "group.initial.rebalance.delay.ms": 0,
        # Lets test workers (faust) ask for short sessions: they wait about half of one before the first assignment.
        "group.min.session.timeout.ms": 1000,
        "log.dirs": work_dir / "data",
    }
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


def _format_storage(java: str, jars: Path, work_dir: Path) -> None:
    tool = ["kafka.tools.StorageTool", "format", "--standalone", "-t", _cluster_id(), "-c", "server.properties"]
    command = [java, *_JVM_OPTIONS, *_classpath(work_dir, jars), *tool]
    result = subprocess.run(command, cwd=work_dir, capture_output=True, text=True)
    if result.returncode != 0:
        raise EngineFailed(f"kafka: formatting the storage failed:\n{(result.stdout + result.stderr)[-2000:]}")


def _ready(port: int, bootstrap: str) -> bool:
    # The cheap socket check first keeps the client from logging connection errors while the JVM boots.
    if not port_open(port):
        return False
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _has_broker(bootstrap)).result()


async def _has_broker(bootstrap: str) -> bool:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    try:
        await admin.start()
        cluster = await admin.describe_cluster()
        return bool(cluster["brokers"])
    except KafkaError:
        return False
    finally:
        await admin.close()
