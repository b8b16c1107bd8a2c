"""Real engines (Apache Kafka, Redis, ClickHouse) as local processes on 127.0.0.1, for tests and local runs.

`python -m rewards.devengines all` starts the three and prints their URLs as environment lines.
"""

from rewards.devengines.clickhouse import clickhouse_engine, start_clickhouse
from rewards.devengines.kafka import kafka_engine, start_kafka
from rewards.devengines.process import Engine, EngineFailed, EngineUnavailable
from rewards.devengines.redis import redis_engine, start_redis

STARTERS = {"kafka": start_kafka, "redis": start_redis, "clickhouse": start_clickhouse}

__all__ = [
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
