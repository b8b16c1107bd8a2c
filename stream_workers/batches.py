"""Cutting a partition's messages into deliveries whose boundaries survive a crash (see `plans`).

Messages are queued per partition in offset order. A delivery is the head of a queue: when a plan is
recorded for the head's offset, exactly up to the plan's last offset (waiting for more messages if
they have not all been read yet); else as many messages as fit in `max_records`, a cut that is then
recorded before anything is written.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

import structlog

from rewards.ports import Delivery, PlanStore
from schemas.records import AnyRecord, Undecodable, decode_message
from stream_workers.plans import plan_key

log = structlog.get_logger(__name__)

TP = tuple[str, int]


@dataclass
class Message:
    topic: str
    partition: int
    offset: int
    value: bytes
    _records: list[AnyRecord | Undecodable] | None = field(default=None, repr=False)

    @property
    def tp(self) -> TP:
        return self.topic, self.partition

    @property
    def records(self) -> list[AnyRecord | Undecodable]:
        if self._records is None:
            self._records = decode_message(self.value)
        return self._records


@dataclass(frozen=True)
class Batch:
    tp: TP
    messages: list[Message]
    last_offset: int  # the plan's: the partition's offset to commit once written is last_offset + 1
    delivery: Delivery


def delivery_token(topic: str, partition: int, first_offset: int, last_offset: int) -> str:
    return f"{topic}:{partition}:{first_offset}-{last_offset}"


class Planner:
    def __init__(self, plans: PlanStore, max_records: int, log_id: str = ""):
        """`log_id`: which log the offsets count in (the Kafka cluster's id), prefixed to tokens and plan keys: a
        new cluster counts offsets from 0 again, and its deliveries must not take the tokens (hence the warehouse's
        insert deduplication) or the plans of the old one's."""
        self._plans = plans
        self._max_records = max_records
        self._prefix = f"{log_id}:" if log_id else ""
        self._queues: dict[TP, list[Message]] = {}
        self._recorded: dict[TP, tuple[int, int]] = {}  # the last plan looked up per partition: (first, last)
        self._added: dict[TP, int] = {}  # messages ever added per partition: tells a lane that more came meanwhile

    def add(self, messages: Iterable[Message]) -> None:
        for message in messages:
            queue = self._queues.setdefault(message.tp, [])
            if queue and message.offset <= queue[-1].offset:
                queue.clear()  # the partition is being read again from an earlier offset (after a rebalance)
            queue.append(message)
            self._added[message.tp] = self._added.get(message.tp, 0) + 1

    def partitions(self) -> list[TP]:
        """The partitions with messages queued."""
        return [tp for tp, queue in self._queues.items() if queue]

    def queued(self, tp: TP) -> int:
        return len(self._queues.get(tp, ()))

    def first_offset(self, tp: TP) -> int | None:
        """The offset of the partition's first queued message (None: none queued)."""
        queue = self._queues.get(tp)
        return queue[0].offset if queue else None

    def added(self, tp: TP) -> int:
        return self._added.get(tp, 0)

    def keep_only(self, assigned: set[TP]) -> None:
        """Forget the messages of partitions this worker no longer holds: their new holder reads them again."""
        for tp in [tp for tp in self._queues if tp not in assigned]:
            self.forget(tp)

    def forget(self, tp: TP) -> None:
        self._queues.pop(tp, None)
        self._recorded.pop(tp, None)
        self._added.pop(tp, None)

    def pending(self) -> int:
        return sum(len(queue) for queue in self._queues.values())

    async def next_batch(self) -> Batch | None:
        """The next delivery ready to be written, its plan recorded; None if every queue waits or is empty."""
        for tp, queue in self._queues.items():
            if queue and (batch := await self._batch(tp, queue)) is not None:
                return batch
        return None

    async def batch_of(self, tp: TP) -> Batch | None:
        """The partition's next delivery, its plan recorded; None if its queue is empty or waits for the rest of a
        recorded plan."""
        queue = self._queues.get(tp)
        return await self._batch(tp, queue) if queue else None

    def done(self, batch: Batch) -> None:
        queue = self._queues.get(batch.tp)
        if queue and queue[0] is batch.messages[0]:
            del queue[: len(batch.messages)]

    async def _batch(self, tp: TP, queue: list[Message]) -> Batch | None:
        last = await self._planned_last(tp, queue)
        if last > queue[-1].offset:
            return None  # a batch recorded before a crash: wait until all of it has been read again
        messages = [m for m in queue if m.offset <= last]
        records = [record for message in messages for record in message.records]
        token = self._prefix + delivery_token(*tp, messages[0].offset, last)
        return Batch(tp, messages, last, Delivery(token, records))

    async def _planned_last(self, tp: TP, queue: list[Message]) -> int:
        first = queue[0].offset
        recorded = self._recorded.get(tp)
        if recorded is None or recorded[0] != first:
            proposed = self._cut(queue).offset
            last, new = await self._plans.claim(self._prefix + plan_key(*tp, first), proposed)
            if not new:
                log.info(
                    "partition read again: following the recorded plan",
                    topic=tp[0],
                    partition=tp[1],
                    first=first,
                    last=last,
                )
            recorded = self._recorded[tp] = (first, last)
        return recorded[1]

    def _cut(self, queue: list[Message]) -> Message:
        """The last message of a new batch: as many as fit in max_records, at least one."""
        count = len(queue[0].records)
        last = queue[0]
        for message in queue[1:]:
            count += len(message.records)
            if count > self._max_records:
                break
            last = message
        return last
