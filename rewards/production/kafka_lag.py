"""The workers' consumer lag on Kafka: messages of the events topic their group has not committed yet.

Offsets are read with read_committed (the end is the last stable offset: an open transaction is not counted
yet); a partition the group never committed counts from its beginning. Offsets include the commit markers of
transactions, so the lag slightly exceeds the number of messages (as in every Kafka lag tool).
"""

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from schemas.topics import EVENTS_TOPIC


class KafkaLag:
    def __init__(self, admin: AIOKafkaAdminClient, consumer: AIOKafkaConsumer, group_id: str, topic: str):
        self._admin, self._consumer, self._group_id, self._topic = admin, consumer, group_id, topic

    @classmethod
    async def start(cls, bootstrap_servers: str, group_id: str, topic: str = EVENTS_TOPIC) -> "KafkaLag":
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap_servers, isolation_level="read_committed", enable_auto_commit=False
        )
        await admin.start()
        try:
            await consumer.start()
        except BaseException:
            await admin.close()
            raise
        return cls(admin, consumer, group_id, topic)

    async def backlog(self) -> int:
        described = await self._admin.describe_topics([self._topic])  # asked each time: partitions may be added
        partitions = sorted(p["partition"] for t in described if t["error_code"] == 0 for p in t["partitions"])
        tps = [TopicPartition(self._topic, p) for p in partitions]
        if not tps:
            return 0
        ends = await self._consumer.end_offsets(tps)
        committed = await self._admin.list_consumer_group_offsets(self._group_id, partitions=tps)
        starts = await self._consumer.beginning_offsets(tps)
        lag = 0
        for tp in tps:
            done = committed.get(tp)
            offset = done.offset if done is not None and done.offset >= 0 else starts[tp]
            lag += max(ends[tp] - offset, 0)
        return lag

    async def close(self) -> None:
        await self._consumer.stop()
        await self._admin.close()
