"""A local Kafka cluster for tests marked `cluster` (a pytest plugin:
`pytest_plugins = [..., "tests.support.kafka_cluster"]`).

- `kafka_cluster` (module): a started 3-node KRaft cluster (rewards.devengines.kafka.KafkaCluster): `url` is its
  bootstrap servers, `nodes[i]` node i+1 (`kill()`, `start()`), `active_controller()` the quorum's leader. Each
  module has its own: its fault tests kill and restart nodes, and its topics start empty. Brokers' defaults are
  a production cluster's: internal topics with 3 replicas, `min.insync.replicas` 2.
- `in_sync(bootstrap, topics)`: wait until every partition of `topics` has all its replicas in sync again (after
  a node came back), so that the next fault finds the cluster whole.

Always local processes: a cluster given by the environment could not be killed node by node. Where no local Kafka
can run, the tests skip with one line (under CI=true they fail).
"""

import time
from collections.abc import Iterator

import pytest

from rewards.devengines import EngineUnavailable
from rewards.devengines.kafka import KafkaCluster
from rewards.devengines.kafka import kafka_cluster as new_kafka_cluster
from tests.support.harness import run_async
from tests.support.real_engines import missing

NODES = 3


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory) -> Iterator[KafkaCluster]:
    try:
        cluster = new_kafka_cluster(tmp_path_factory.mktemp("kafka-cluster"), nodes=NODES)
    except EngineUnavailable as error:
        missing(f"kafka cluster: no local Kafka ({error})")
    cluster.start()
    yield cluster
    cluster.stop()


def in_sync(bootstrap: str, topics: list[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while (behind := run_async(_out_of_sync(bootstrap, topics))) != []:
        assert time.monotonic() < deadline, f"partitions still missing replicas after {timeout_s:.0f} s: {behind}"
        time.sleep(0.5)


async def _out_of_sync(bootstrap: str, topics: list[str]) -> list[str] | None:
    """The partitions of `topics` whose in-sync replicas are fewer than their replicas (None: not known now)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    try:
        await admin.start()
        described = await admin.describe_topics(topics)
    except (KafkaError, TimeoutError):  # a node down may have been asked: ask again
        return None
    finally:
        await admin.close()
    if any(topic["error_code"] for topic in described):
        return None
    return [
        f"{topic['topic']}-{partition['partition']}"
        for topic in described
        for partition in topic["partitions"]
        if len(partition["isr"]) < len(partition["replicas"])
    ]
