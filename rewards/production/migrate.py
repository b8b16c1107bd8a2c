"""`rewards migrate`: the events and dead-letter topics and the warehouse's tables and views, created if missing."""

from rewards.production.kafka_log import MAX_REQUEST_BYTES
from rewards.settings import Settings
from schemas.topics import DLQ_RETENTION_MS, DLQ_TOPIC, EVENTS_TOPIC


async def create_topic(
    bootstrap: str, partitions: int, replication: int, name: str = EVENTS_TOPIC, configs: dict | None = None
) -> bool:
    """Create the topic with `configs`; one that exists gets `configs` set (e.g. a larger message limit)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        if name not in await admin.list_topics():
            topic = NewTopic(
                name, num_partitions=partitions, replication_factor=replication, topic_configs=configs or {}
            )
            try:
                await admin.create_topics([topic])
                return True
            except TopicAlreadyExistsError:  # another process created it meanwhile
                pass
        if configs:
            await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs=configs)])
        return False
    finally:
        await admin.close()


async def migrate(settings: Settings) -> dict:
    from rewards.migrations import migrate as migrate_warehouse
    from rewards.production.clickhouse_warehouse import ClickHouseWarehouse

    settings.require_engines()
    bootstrap, partitions, replication = (
        settings.kafka_bootstrap_servers,
        settings.events_partitions,
        settings.kafka_replication_factor,
    )
    # A message is one accepted batch: up to the request body limit, and more as records. The broker's default
    # (~1 MB) would refuse a full batch of incompressible events forever; the producer allows the same.
    events_configs = {"max.message.bytes": str(MAX_REQUEST_BYTES)}
    created = await create_topic(bootstrap, partitions, replication, EVENTS_TOPIC, events_configs)
    dlq_configs = {"retention.ms": str(DLQ_RETENTION_MS)}
    dlq_created = await create_topic(bootstrap, partitions, replication, DLQ_TOPIC, dlq_configs)
    warehouse = await ClickHouseWarehouse.connect(settings.clickhouse_url)
    try:
        run = await migrate_warehouse(warehouse, progress=True)  # the numbered migrations, a bar while several run
    finally:
        await warehouse.close()
    return {
        "topic": EVENTS_TOPIC, "topic_created": created, "dlq_topic": DLQ_TOPIC, "dlq_topic_created": dlq_created,
        "warehouse": "migrated", "migrations": run.summary(),
    }  # fmt: skip
