"""Real engines (Apache Kafka, Redis, ClickHouse) as local processes on 127.0.0.1, for tests and local runs.

`python -m rewards.devengines all` starts the three and prints their URLs as environment lines; `--cluster` starts
each as a local cluster instead (3 KRaft brokers, 3 Redis masters, 2 ClickHouse shards).
"""

from rewards.devengines.clickhouse import clickhouse_engine, start_clickhouse, start_clickhouse_cluster
from rewards.devengines.kafka import kafka_engine, start_kafka, start_kafka_cluster
from rewards.devengines.process import Engine, EngineFailed, EngineUnavailable
from rewards.devengines.redis import redis_engine, start_redis, start_redis_cluster

STARTERS = {"kafka": start_kafka, "redis": start_redis, "clickhouse": start_clickhouse}
CLUSTER_STARTERS = {"kafka": start_kafka_cluster, "redis": start_redis_cluster, "clickhouse": start_clickhouse_cluster}

__all__ = [
    "CLUSTER_STARTERS",
    "STARTERS",
    "Engine",
    "EngineFailed",
    "EngineUnavailable",
    "clickhouse_engine",
    "kafka_engine",
    "redis_engine",
    "start_clickhouse",
    "start_kafka",
    "start_redis",
]
