"""A sharded ClickHouse cluster for the tests marked `cluster` (a pytest plugin: add
"tests.support.clickhouse_cluster" to `pytest_plugins` in tests/conftest.py).

Fixtures:
- `clickhouse_cluster` (session): a `ClusterNodes`, the cluster's name and every node's URL. A real cluster when
  REWARDS_CLICKHOUSE_CLUSTER and REWARDS_CLICKHOUSE_NODES are set (each node holding its own tables: the sharded
  layout); else two chdb server nodes started here (rewards.devengines.clickhouse.start_clickhouse_cluster).
  Where neither can be had the tests skip with one line; under CI=true they fail.
- `cluster_settings` (function): a database of its own on every node, as the `Settings` that
  `ClickHouseWarehouse.open` reads (CLICKHOUSE_URL: the first node's), dropped after the test.
"""

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest

from rewards.devengines import EngineUnavailable
from rewards.devengines.clickhouse import connect, start_clickhouse_cluster
from rewards.settings import Settings
from tests.support.real_engines import missing


@dataclass(frozen=True)
class ClusterNodes:
    cluster: str
    urls: list[str]  # "http://host:port" of every node


@pytest.fixture(scope="session")
def clickhouse_cluster(tmp_path_factory) -> Iterator[ClusterNodes]:
    name, nodes = os.environ.get("REWARDS_CLICKHOUSE_CLUSTER"), os.environ.get("REWARDS_CLICKHOUSE_NODES")
    if name and nodes:
        urls = [urlsplit(url.strip())._replace(path="").geturl() for url in nodes.split(",") if url.strip()]
        yield ClusterNodes(name, urls)
        return
    try:
        engines = start_clickhouse_cluster(tmp_path_factory.mktemp("clickhouse-cluster"))
    except EngineUnavailable as error:
        missing(f"clickhouse cluster: no REWARDS_CLICKHOUSE_CLUSTER/NODES set, no local cluster ({error})")
    yield ClusterNodes(engines.cluster, engines.urls)
    engines.stop()


@pytest.fixture
def cluster_settings(clickhouse_cluster: ClusterNodes) -> Iterator[Settings]:
    database = f"shards_{uuid.uuid4().hex[:10]}"
    admins = [connect(url) for url in clickhouse_cluster.urls]
    for admin in admins:
        admin.command(f"CREATE DATABASE {database}")
    urls = tuple(f"{url.rstrip('/')}/{database}" for url in clickhouse_cluster.urls)
    yield Settings(clickhouse_url=urls[0], clickhouse_cluster=clickhouse_cluster.cluster, clickhouse_nodes=urls)
    for admin in admins:
        admin.command(f"DROP DATABASE IF EXISTS {database} SYNC")
        admin.close()
