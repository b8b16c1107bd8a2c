"""`rewards migrate`: the events and dead-letter topics and the warehouse's tables and views, created if missing.

Every topic gets REWARDS_KAFKA_REPLICATION_FACTOR replicas and the topic config `min.insync.replicas` =
REWARDS_KAFKA_MIN_INSYNC_REPLICAS (3 and 2 on a production cluster: every producer sends acks=all, so a write
is acknowledged once two replicas have it, and one broker down neither loses nor refuses writes). The configs
of a topic that exists are set again; its replication factor is not changed (that is a partition
reassignment, `kafka-reassign-partitions`): a topic with another one is reported by a warning.

The cluster may have a broker down meanwhile: each admin request is asked again of another broker
(kafka_lag.on_live_broker) until TOPIC_TIMEOUT_S is over.
"""

import asyncio

import structlog

from rewards.adapters.production.kafka_lag import on_live_broker
from rewards.adapters.production.kafka_log import MAX_REQUEST_BYTES
from rewards.settings import Settings
from schemas.topics import DLQ_RETENTION_MS, DLQ_TOPIC, EVENTS_TOPIC

log = structlog.get_logger(__name__)

TOPIC_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_MS = 5000


async def create_topic(
    bootstrap: str, partitions: int, replication: int, name: str = EVENTS_TOPIC, configs: dict | None = None
) -> bool:
    """Create the topic with `configs`; one that exists gets `configs` set (e.g. a larger message limit).

    `configs` replaces the topic's configs set before (the non-incremental AlterConfigs): give them all."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=REQUEST_TIMEOUT_MS)
    await admin.start()
    try:
        async with asyncio.timeout(TOPIC_TIMEOUT_S):
            return await _create_or_update(admin, partitions, replication, name, configs or {})
    finally:
        await admin.close()


async def _create_or_update(admin, partitions: int, replication: int, name: str, configs: dict) -> bool:
    from aiokafka.admin import NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.errors import TopicAlreadyExistsError

    if name not in await on_live_broker(admin.list_topics):
        topic = NewTopic(name, num_partitions=partitions, replication_factor=replication, topic_configs=configs)
        try:
            await on_live_broker(lambda: _created(admin.create_topics([topic])))
            return True
        except TopicAlreadyExistsError:  # another process created it meanwhile (or our own try that timed out)
            pass
    described = await on_live_broker(lambda: admin.describe_topics([name]))
    found = {len(p["replicas"]) for t in described for p in t["partitions"]}
    min_insync = int(configs.get("min.insync.replicas", 1))
    if found and min(found) < min_insync:  # acks=all writes would all be refused: refuse before changing anything
        raise SystemExit(
            f"topic {name} has {min(found)} replica(s) per partition, fewer than min.insync.replicas {min_insync}:"
            " every write would be refused. Reassign its partitions first (kafka-reassign-partitions), or lower"
            " REWARDS_KAFKA_MIN_INSYNC_REPLICAS"
        )
    if found != {replication}:
        log.warning(
            "topic replication factor differs from the settings; migrate does not change it",
            topic=name,
            replication_factor=sorted(found),
            settings=replication,
        )
    if configs:
        resource = ConfigResource(ConfigResourceType.TOPIC, name, configs=configs)
        await on_live_broker(lambda: _altered(admin.alter_configs([resource])))
    return False


# aiokafka's admin client returns the brokers' answers as they are, errors included (a topic that exists, a
# replication factor larger than the live brokers): these raise them.
async def _created(request) -> None:
    for topic, code, *message in (await request).topic_errors:
        _raise_for(code, topic, message)


async def _altered(request) -> None:
    for response in await request:
        for code, message, _, name in response.resources:
            _raise_for(code, name, message)


def _raise_for(code: int, name: str, message: list) -> None:
    from aiokafka.errors import for_code

    if code:
        raise for_code(code)(f"{name}: {' '.join(str(m) for m in message if m)}")


async def migrate(settings: Settings) -> dict:
    from rewards.adapters.migrations import migrate as migrate_warehouse
    from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse

    settings.require_engines()
    bootstrap, partitions, replication, min_insync = (
        settings.kafka_bootstrap_servers,
        settings.events_partitions,
        settings.kafka_replication_factor,
        settings.kafka_min_insync_replicas,
    )
    if min_insync > replication:
        raise SystemExit(
            f"REWARDS_KAFKA_MIN_INSYNC_REPLICAS ({min_insync}) exceeds REWARDS_KAFKA_REPLICATION_FACTOR"
            f" ({replication}): the brokers would refuse every write"
        )
    durability = {"min.insync.replicas": str(min_insync)}
    # A message is one accepted batch: up to the request body limit, and more as records. The broker's default
    # (~1 MB) would refuse a full batch of incompressible events forever; the producer allows the same.
    events_configs = {"max.message.bytes": str(MAX_REQUEST_BYTES), **durability}
    created = await create_topic(bootstrap, partitions, replication, EVENTS_TOPIC, events_configs)
    dlq_configs = {"retention.ms": str(DLQ_RETENTION_MS), **durability}
    dlq_created = await create_topic(bootstrap, partitions, replication, DLQ_TOPIC, dlq_configs)
    warehouse = await ClickHouseWarehouse.open(settings)  # on a cluster, with its nodes (REWARDS_CLICKHOUSE_*)
    try:
        run = await migrate_warehouse(warehouse, progress=True)  # the numbered migrations, a bar while several run
    finally:
        await warehouse.close()
    return {
        "topic": EVENTS_TOPIC, "topic_created": created, "dlq_topic": DLQ_TOPIC, "dlq_topic_created": dlq_created,
        "warehouse": "migrated", "migrations": run.summary(),
    }  # fmt: skip
