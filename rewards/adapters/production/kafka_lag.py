"""The workers' consumer lag on Kafka: messages of the events topic their group has not committed yet.

Offsets are read with read_committed (the end is the last stable offset: an open transaction is not counted
yet); a partition the group never committed counts from its beginning. Offsets include the commit markers of
transactions, so the lag slightly exceeds the number of messages (as in every Kafka lag tool).

One broker down must not hold the ingest edge back (it measures the lag on its requests' path, under a lock):
a measure is bounded by MEASURE_TIMEOUT_S and raises when the cluster did not answer in time, and the caller
keeps its last measure (rewards.web.backpressure counts and logs the failure). Within that time the measure asks
again wherever a broker did not answer (`on_live_broker`): aiokafka's admin client sends each request to a
random broker of its metadata, which lists a dead broker until the controller fences it (about 9 s,
`broker.session.timeout.ms`), so a request meets the dead broker now and then (NodeNotReadyError), and the
group's coordinator or a partition's leader may be the dead broker until their leadership moves.
"""

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from prometheus_client import Counter

from schemas.topics import EVENTS_TOPIC

log = structlog.get_logger(__name__)
T = TypeVar("T")

MEASURE_TIMEOUT_S = 1.0  # the whole measure; requests wait for it (a healthy cluster answers in milliseconds)
REQUEST_TIMEOUT_MS = 1000  # of one request: a broker that stopped answering is left for another sooner
RETRY_BACKOFF_S = 0.05

RETRIED = Counter(
    "rewards_kafka_admin_retries_total",
    "Kafka admin requests asked again because a broker did not answer (down, or no longer leader or coordinator)",
)


class KafkaLag:
    def __init__(self, admin: AIOKafkaAdminClient, consumer: AIOKafkaConsumer, group_id: str, topic: str):
        self._admin, self._consumer, self._group_id, self._topic = admin, consumer, group_id, topic

    @classmethod
    async def start(cls, bootstrap_servers: str, group_id: str, topic: str = EVENTS_TOPIC) -> "KafkaLag":
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=REQUEST_TIMEOUT_MS)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap_servers, isolation_level="read_committed", enable_auto_commit=False
        )
        await start_both(admin, consumer)
        return cls(admin, consumer, group_id, topic)

    async def backlog(self) -> int:
        """The lag, or TimeoutError (or a KafkaError that asking again cannot help) within MEASURE_TIMEOUT_S."""
        async with asyncio.timeout(MEASURE_TIMEOUT_S):
            tps = await on_live_broker(self._partitions)
            if not tps:
                return 0
            ends = await self._consumer.end_offsets(tps)  # (the consumer follows partition leaders itself)
            committed = await on_live_broker(lambda: self._committed(tps))
            starts = await self._consumer.beginning_offsets(tps)
        lag = 0
        for tp in tps:
            done = committed[tp]
            offset = done.offset if done.offset >= 0 else starts[tp]
            lag += max(ends[tp] - offset, 0)
        return lag

    async def ends(self) -> dict[TopicPartition, int]:
        """Each partition's last stable offset now (read_committed: the end of what is decided)."""
        async with asyncio.timeout(MEASURE_TIMEOUT_S):
            tps = await on_live_broker(self._partitions)
            return await self._consumer.end_offsets(tps) if tps else {}

    async def written_up_to(self, ends: dict[TopicPartition, int]) -> bool:
        """Whether the workers have written every record before `ends`. Every producer of the topic is transactional,
        so the offset just before a last stable offset is a transaction's marker, never a record: a group committed
        at `end - 1` (a delivery's last record + 1) has written all before it."""
        async with asyncio.timeout(MEASURE_TIMEOUT_S):
            committed = await on_live_broker(lambda: self._committed(list(ends)))
        return all(end <= 0 or committed[tp].offset >= end - 1 for tp, end in ends.items())

    async def close(self) -> None:
        await self._consumer.stop()
        await self._admin.close()

    async def _partitions(self) -> list[TopicPartition]:
        described = await self._admin.describe_topics([self._topic])  # asked each time: partitions may be added
        partitions = sorted(p["partition"] for t in described if t["error_code"] == 0 for p in t["partitions"])
        return [TopicPartition(self._topic, p) for p in partitions]

    async def _committed(self, tps: list[TopicPartition]) -> dict:
        return await committed_offsets(self._admin, self._group_id, tps)


async def start_both(admin: AIOKafkaAdminClient, consumer: AIOKafkaConsumer) -> None:
    """Start an admin client and a consumer, or neither (the admin closed again if the consumer does not start)."""
    await admin.start()
    try:
        await consumer.start()
    except BaseException:
        await admin.close()
        raise


async def committed_offsets(admin: AIOKafkaAdminClient, group_id: str, tps: list[TopicPartition]) -> dict:
    """The group's committed offset of each partition (an OffsetAndMetadata; offset -1: never committed). Raises a
    retriable KafkaError (ask again: `on_live_broker`) when the broker asked was not the group's coordinator (any
    more): its answer is then empty, and counting from the beginning would be wrong."""
    committed = await admin.list_consumer_group_offsets(group_id, partitions=tps)
    if any(tp not in committed for tp in tps):
        raise _NotAnswered(f"the coordinator of group {group_id} did not answer for every partition")
    return committed


class _NotAnswered(KafkaError):
    retriable = True


async def on_live_broker(request: Callable[[], Awaitable[T]]) -> T:
    """`request()`, asked again after a short pause for as long as it fails in a way another try may not (a broker
    down or no longer in charge, a request timed out): bound it with the caller's timeout."""
    while True:
        try:
            return await request()
        except (KafkaError, TimeoutError) as exc:
            if isinstance(exc, KafkaError) and not exc.retriable:
                raise
            RETRIED.inc()
            log.info("kafka admin request not answered; asking again", error=repr(exc))
        await asyncio.sleep(RETRY_BACKOFF_S)
