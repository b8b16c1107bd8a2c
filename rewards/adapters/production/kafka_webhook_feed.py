"""The webhook dispatcher's EventSource on Kafka: the events topic read by a consumer group of its own, each record
given only once the workers have written it.

Written means the workers' group has committed past its offset (they commit a partition right after writing its
delivery: stream_workers.faust_app), so a record read here is held until the workers' committed offset of its
partition passes it. A partition with HOLD_MAX records held is paused until they are given; the dispatcher's group
commits a partition's offset once its deliveries are enqueued (at least once: read again after a crash or a
rebalance, the queue enqueues nothing twice). Read committed: an aborted transaction's records are never seen.

A new group starts at the topic's beginning: the events module sends an endpoint nothing older than itself, so the
replay of the retained log costs reading, not deliveries.
"""

import asyncio
from collections.abc import Sequence

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import CommitFailedError, KafkaError

from rewards.adapters.production.kafka_lag import REQUEST_TIMEOUT_MS, on_live_broker, start_both
from rewards.ports import Delivery
from schemas.records import Undecodable, decode_message
from schemas.topics import EVENTS_TOPIC

log = structlog.get_logger(__name__)

HOLD_MAX = 5_000  # records held per partition, waiting for the workers, before it is paused
MAX_RECORDS = 2_000  # per fetch
WAIT_S = 0.05  # nothing written yet: look again after this
WORKERS_ASKED_S = 0.05  # the workers' committed offsets are asked again at most this often
ASK_TIMEOUT_S = 5.0


class _Revoked(ConsumerRebalanceListener):
    def __init__(self, feed: "KafkaWebhookFeed"):
        self._feed = feed

    async def on_partitions_revoked(self, revoked) -> None:
        for tp in revoked:  # their new holder reads them from the group's committed offset
            self._feed._held.pop(tp, None)

    async def on_partitions_assigned(self, assigned) -> None:
        pass


class KafkaWebhookFeed:
    def __init__(self, consumer: AIOKafkaConsumer, admin: AIOKafkaAdminClient, workers_group: str):
        self._consumer, self._admin, self._workers_group = consumer, admin, workers_group
        self._held: dict[TopicPartition, list] = {}
        self._written: dict[TopicPartition, int] = {}
        self._asked_at = 0.0

    @classmethod
    async def start(
        cls, bootstrap_servers: str, group_id: str, workers_group: str, topic: str = EVENTS_TOPIC
    ) -> "KafkaWebhookFeed":
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap_servers, group_id=group_id, isolation_level="read_committed",
            enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=MAX_RECORDS,
        )  # fmt: skip
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=REQUEST_TIMEOUT_MS)
        feed = cls(consumer, admin, workers_group)
        consumer.subscribe([topic], listener=_Revoked(feed))
        await start_both(admin, consumer)
        return feed

    async def poll(self, max_deliveries: int, timeout_s: float) -> list[Delivery]:
        fetched = await self._consumer.getmany(timeout_ms=int(self._fetch_wait(timeout_s) * 1000),
                                               max_records=MAX_RECORDS)  # fmt: skip
        for tp, messages in fetched.items():
            self._held.setdefault(tp, []).extend(messages)
        if not any(self._held.values()):
            return []
        await self._ask_workers()
        deliveries = []
        for tp in list(self._held):
            if len(deliveries) < max_deliveries and (delivery := self._give(tp)) is not None:
                deliveries.append(delivery)
        self._pause_full()
        if not deliveries:
            await asyncio.sleep(WAIT_S)
        return deliveries

    async def commit(self, deliveries: Sequence[Delivery]) -> None:
        offsets: dict[TopicPartition, int] = {}
        for delivery in deliveries:
            topic, partition, last = _position(delivery.token)
            tp = TopicPartition(topic, partition)
            offsets[tp] = max(offsets.get(tp, 0), last + 1)
        try:
            await self._consumer.commit(offsets)
        except CommitFailedError:  # moved in a rebalance: its new holder reads from the last commit (enqueued once)
            log.info("webhook feed offsets not committed (partitions moved)", offsets=str(offsets))

    async def close(self) -> None:
        await self._consumer.stop()
        await self._admin.close()

    def _fetch_wait(self, timeout_s: float) -> float:
        return WAIT_S if any(self._held.values()) else timeout_s

    def _give(self, tp: TopicPartition) -> Delivery | None:
        """The partition's held records the workers have written, as one delivery."""
        held, written = self._held.get(tp, []), self._written.get(tp, -1)
        ready = 0
        while ready < len(held) and held[ready].offset < written:
            ready += 1
        if not ready:
            return None
        given, self._held[tp] = held[:ready], held[ready:]
        if tp in self._consumer.paused() and len(self._held[tp]) < HOLD_MAX:
            self._consumer.resume(tp)
        records = [r for m in given for r in decode_message(m.value) if not isinstance(r, Undecodable)]
        return Delivery(f"{tp.topic}:{tp.partition}:{given[0].offset}-{given[-1].offset}", records)

    def _pause_full(self) -> None:
        full = [tp for tp, held in self._held.items() if len(held) >= HOLD_MAX]
        if full:
            self._consumer.pause(*full)

    async def _ask_workers(self) -> None:
        """The workers' committed offsets of the partitions with records held (asked at most every WORKERS_ASKED_S)."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._asked_at < WORKERS_ASKED_S:
            return
        tps = [tp for tp, held in self._held.items() if held]
        try:
            async with asyncio.timeout(ASK_TIMEOUT_S):
                committed = await on_live_broker(
                    lambda: self._admin.list_consumer_group_offsets(self._workers_group, partitions=tps)
                )
        except (KafkaError, TimeoutError) as exc:  # nothing given this time; asked again next poll
            log.warning("the workers' offsets were not answered", error=repr(exc))
            return
        self._asked_at = loop.time()
        for tp, meta in committed.items():
            self._written[tp] = meta.offset


def _position(token: str) -> tuple[str, int, int]:
    topic, partition, offsets = token.rsplit(":", 2)
    return topic, int(partition), int(offsets.split("-")[1])
