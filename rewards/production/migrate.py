"""`rewards migrate`: the events topic and the warehouse's tables and views, created if missing."""

from rewards.settings import Settings
from schemas.topics import EVENTS_TOPIC


async def create_topic(bootstrap: str, partitions: int, replication: int) -> bool:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        if EVENTS_TOPIC in await admin.list_topics():
            return False
        topic = NewTopic(EVENTS_TOPIC, num_partitions=partitions, replication_factor=replication)
        try:
            await admin.create_topics([topic])
        except TopicAlreadyExistsError:  # another process created it meanwhile
            return False
        return True
    finally:
        await admin.close()


async def migrate(settings: Settings) -> dict:
    from rewards.production.clickhouse_warehouse import ClickHouseWarehouse

    settings.require_engines()
    created = await create_topic(
        settings.kafka_bootstrap_servers, settings.events_partitions, settings.kafka_replication_factor
    )
    warehouse = await ClickHouseWarehouse.connect(settings.clickhouse_url)
    try:
        await warehouse.migrate()
    finally:
        await warehouse.close()
    return {"topic": EVENTS_TOPIC, "topic_created": created, "warehouse": "migrated"}
