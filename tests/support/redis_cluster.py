"""A local Redis Cluster for tests marked `cluster` (a pytest plugin: list "tests.support.redis_cluster" in conftest's
`pytest_plugins`).

- `redis_cluster_url` (session): "redis://127.0.0.1:<port>/0", one node of a Redis Cluster of 3 masters: the
  REDIS_CLUSTER_URL environment variable if set, else a cluster this session starts
  (rewards.devengines.redis.start_redis_cluster) and stops. Where neither can be had, the test skips with one
  line saying why, or fails under CI=true (tests.support.real_engines.missing).
"""

import os
from collections.abc import Iterator

import pytest

from rewards.devengines import EngineUnavailable
from rewards.devengines.redis import start_redis_cluster
from tests.support.real_engines import missing


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory) -> Iterator[str]:
    if os.environ.get("REDIS_CLUSTER_URL"):
        yield os.environ["REDIS_CLUSTER_URL"]
        return
    try:
        cluster = start_redis_cluster(tmp_path_factory.mktemp("redis-cluster"))
    except EngineUnavailable as exc:
        missing(f"redis cluster: no REDIS_CLUSTER_URL set, no local cluster ({str(exc).splitlines()[0]})")
    yield cluster.url
    cluster.stop()
