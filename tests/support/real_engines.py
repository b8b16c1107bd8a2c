"""Real engines for tests (a pytest plugin: `pytest_plugins = ["tests.support.real_engines"]`).

Fixtures, all real engines over real connections:
- `kafka_url` (session): "host:port" bootstrap servers.
- `redis_url` (session): "redis://host:port/0".
- `clickhouse_url` (session): "http://[user:password@]host:port"; `rewards.devengines.clickhouse.connect(url)`
  gives a clickhouse-connect client for it.
- `kafka_broker` (function): a broker the test may `stop()` and `start()` again (same url, same data);
  it is running again after the test. Fault tests need a broker they control, so this one never is
  the one named by KAFKA_BOOTSTRAP_SERVERS; without that variable it is the same broker as `kafka_url`.
- `owned_kafka`, `owned_redis`, `owned_clickhouse` (session): the engines this session started itself
  (rewards.devengines.Engine, or a paused/unpaused container), used by the fixtures above.

Each engine comes from, in order: its URL in the environment (KAFKA_BOOTSTRAP_SERVERS, REDIS_URL,
CLICKHOUSE_URL); a local process started by rewards.devengines; testcontainers where a Docker engine
answers. Where none can, the tests that need it skip with one line saying what is missing; under CI=true
they fail instead.
"""

import importlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rewards.devengines import EngineUnavailable, clickhouse_engine, kafka_engine, redis_engine

_ENV = {"kafka": "KAFKA_BOOTSTRAP_SERVERS", "redis": "REDIS_URL", "clickhouse": "CLICKHOUSE_URL"}
_LOCAL = {"kafka": kafka_engine, "redis": redis_engine, "clickhouse": clickhouse_engine}


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def missing(what: str) -> None:
    """Skip, or under CI fail: a real-engine test never silently passes without its engine."""
    if under_ci():
        pytest.fail(f"{what} (CI=true: a missing engine is a failure)", pytrace=False)
    pytest.skip(what)


@dataclass
class Container:
    """A testcontainers engine with the Engine handle's shape; stop() pauses it so its port and url stay."""

    container: object
    url: str
    log_path: Path | None = None

    @property
    def running(self) -> bool:
        self.container.get_wrapped_container().reload()
        return self.container.get_wrapped_container().status == "running"

    def stop(self) -> None:
        if self.running:
            self.container.get_wrapped_container().pause()

    def start(self) -> "Container":
        if not self.running:
            self.container.get_wrapped_container().unpause()
        return self

    def close(self) -> None:
        self.start()
        self.container.stop()


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:  # no SDK, no socket, no daemon: all mean "no Docker here"
        return False


def _testcontainers(module: str):
    # Newer testcontainers keep the engines under .community and warn on the old paths.
    try:
        return importlib.import_module(f"testcontainers.community.{module}")
    except ImportError:
        return importlib.import_module(f"testcontainers.{module}")


def _container(name: str) -> Container:
    if name == "kafka":
        kafka = _testcontainers("kafka").KafkaContainer().with_kraft().start()
        return Container(kafka, kafka.get_bootstrap_server())
    if name == "redis":
        redis = _testcontainers("redis").RedisContainer("redis:7").start()
        return Container(redis, f"redis://{redis.get_container_host_ip()}:{redis.get_exposed_port(6379)}/0")
    clickhouse = _testcontainers("clickhouse").ClickHouseContainer().start()
    host, port = clickhouse.get_container_host_ip(), clickhouse.get_exposed_port(8123)
    return Container(clickhouse, f"http://{clickhouse.username}:{clickhouse.password}@{host}:{port}")


def _own_engine(name: str, work_dir: Path) -> Iterator:
    """An engine this session starts and stops: a local process, else a container, else skip/fail."""
    try:
        engine = _LOCAL[name](work_dir).start()
    except EngineUnavailable as error:
        reason = str(error).splitlines()[0].removeprefix(f"{name}: ")
    else:
        yield engine
        engine.stop()
        return
    if not _docker_answers():
        missing(f"{name}: no {_ENV[name]} set, no local engine ({reason}), no Docker engine answers")
    container = _container(name)
    yield container
    container.close()


@pytest.fixture(scope="session")
def owned_kafka(tmp_path_factory) -> Iterator:
    yield from _own_engine("kafka", tmp_path_factory.mktemp("kafka"))


@pytest.fixture(scope="session")
def owned_redis(tmp_path_factory) -> Iterator:
    yield from _own_engine("redis", tmp_path_factory.mktemp("redis"))


@pytest.fixture(scope="session")
def owned_clickhouse(tmp_path_factory) -> Iterator:
    yield from _own_engine("clickhouse", tmp_path_factory.mktemp("clickhouse"))


@pytest.fixture(scope="session")
def kafka_url(request) -> str:
    return os.environ.get(_ENV["kafka"]) or request.getfixturevalue("owned_kafka").url


@pytest.fixture(scope="session")
def redis_url(request) -> str:
    return os.environ.get(_ENV["redis"]) or request.getfixturevalue("owned_redis").url


@pytest.fixture(scope="session")
def clickhouse_url(request) -> str:
    return os.environ.get(_ENV["clickhouse"]) or request.getfixturevalue("owned_clickhouse").url


@pytest.fixture
def kafka_broker(owned_kafka) -> Iterator:
    yield owned_kafka
    owned_kafka.start()
