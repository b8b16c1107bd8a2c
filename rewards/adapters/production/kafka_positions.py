"""Where a partition of the events topic truly resumes: what the workers' pipeline checks after every rebalance.

faust may lose messages of a partition across a rebalance (stream_workers.faust_app, "Continuity"): messages fetched
while its flow is suspended are dropped, and its recovery seeks back only to committed offsets above 0, so a
partition that stays with the same worker can go on from past them. The pipeline therefore checks the first message
it gets of each partition after a rebalance against the log itself, read here by a consumer of its own (no group,
read_committed, so the same records the workers see): the first record at or after the group's committed offset.
"""

import asyncio

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from rewards.adapters.production.kafka_lag import committed_offsets, on_live_broker, start_both
from schemas.topics import EVENTS_TOPIC

ASK_TIMEOUT_S = 10.0  # asking the group's coordinator again while it moves (or is still being elected)
READ_TIMEOUT_S = 5.0  # a record that the end offset says is there arrives in milliseconds from a live broker


class KafkaPositions:
    def __init__(self, admin: AIOKafkaAdminClient, consumer: AIOKafkaConsumer, group_id: str, topic: str):
        self._admin, self._consumer, self._group_id, self._topic = admin, consumer, group_id, topic
        self._reading = asyncio.Lock()  # one partition read at a time: the consumer's assignment is shared

    @classmethod
    async def start(cls, bootstrap_servers: str, group_id: str, topic: str = EVENTS_TOPIC) -> "KafkaPositions":
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # an offset the retention removed reads from the partition's first
        )
        await start_both(admin, consumer)
        return cls(admin, consumer, group_id, topic)

    async def resume_point(self, partition: int) -> int:
        """The offset the group resumes the partition from: its committed offset, or the partition's first offset if
        the group never committed one."""
        tp = TopicPartition(self._topic, partition)
        async with asyncio.timeout(ASK_TIMEOUT_S):
            committed = await on_live_broker(lambda: committed_offsets(self._admin, self._group_id, [tp]))
        return max(committed[tp].offset, (await self._consumer.beginning_offsets([tp]))[tp])  # -1: never committed

    async def first_record(self, partition: int, offset: int) -> int | None:
        """The offset of the first committed record at or after `offset` (transaction markers and aborted records
        skipped), or None if there is none up to the partition's last stable offset."""
        tp = TopicPartition(self._topic, partition)
        async with self._reading:
            end = (await self._consumer.end_offsets([tp]))[tp]
            if offset >= end:
                return None
            self._consumer.assign([tp])
            self._consumer.seek(tp, offset)
            async with asyncio.timeout(READ_TIMEOUT_S):
                while await self._consumer.position(tp) < end:
                    records = await self._consumer.getmany(tp, timeout_ms=200, max_records=1)
                    if records.get(tp):
                        return records[tp][0].offset
            return None

    async def close(self) -> None:
        await self._consumer.stop()
        await self._admin.close()
