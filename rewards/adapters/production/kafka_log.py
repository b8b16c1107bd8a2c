"""The event log on Apache Kafka: each publish committed in a Kafka transaction, from a pool of producers.

`publish` writes ONE message (all of a batch's records, keyed by project so a project stays in order
on one partition) inside a Kafka transaction and returns only once the transaction is committed;
`publish_shards` writes a batch's conversions as one message per partition they spread over
(schemas.topics.shard_of), all in one transaction: the batch is still seen whole or not at all.
The workers read with isolation level read_committed, so a batch is seen whole or not at all: a
publish that fails is aborted (or, if the producer is lost, never committed and aborted by the broker
after `TRANSACTION_TIMEOUT_MS`) and raises, and the caller's state-store block then undoes its claims
(the HTTP layer answers 503). A publish whose commit reached the broker but whose answer did not
raises too; the client's retry then publishes the records again, and the workers drop the repeat
(`StateStore.processed_among`). `PublishFailed.maybe_published` tells the two apart: False when the
records surely were not published, True when they may have been (the Redis state store then keeps its
change and lets its outbox relay publish it, rather than undo a change the warehouse may learn of).

Group commit: an aiokafka producer runs one transaction at a time, so each process keeps `pool_size`
of them (each with its own transactional id), and each takes, when it is free, every publish waiting
at that moment (up to `MAX_GROUP`) into one transaction: one message per publish, one commit for all.
Under load a transaction carries many batches (a commit costs a few round trips and commit markers on
the broker, whatever it carries); alone, a publish waits for nobody. A failed transaction fails every
publish in it, each answered 503 with its claims undone: all or none still holds for every batch.

Every wait is bounded: a dead broker makes `publish` raise within `PUBLISH_TIMEOUT_S` instead of
hanging; a publish given up before a producer took it is never sent. One a producer took is settled by
that producer's own deadline (`PUBLISH_TIMEOUT_S` from the take): its caller waits for that verdict (at most
`SETTLE_S` past it) rather than answer "maybe published" while the producer may still refuse it.
A producer whose state is unknown after a failure (its abort failed or timed out) is replaced by a new one
under the same transactional id, started on its next use: the new producer's initialisation fences the old
one and aborts whatever transaction it left open.

Transactional ids are stable per process slot, so that a restart fences the dead: producer n of the pool
is `rewards-ingest-<instance>-<index>-<n>`, where `instance` is REWARDS_INGEST_INSTANCE (a pod name, a
StatefulSet ordinal, a systemd instance) or else the host name, and `index` is the lowest free one among
this machine's live event logs of that instance (a lock file each, rewards.adapters.production.process_index,
`flock`ed for the log's life, touched so that temp-dir cleaners leave it, released by the kernel when its
process dies: the N workers of `ingest-api --processes N` hold 0..N-1, and
a worker restarted after a crash takes its dead predecessor's index). A restarted process's producers thus
initialise the dead one's ids, which fences it and aborts its open transactions at once, instead of holding
back every read_committed reader of their partitions until the broker's `TRANSACTION_TIMEOUT_MS`. (Ids the
restarted process does not reuse, e.g. after the pool shrank, still wait for that timeout.)

The rule: two live processes never share an instance across machines (on one machine the index keeps them
apart). If they do, each producer start fences the other's: a fenced producer fails its publishes (503),
logs an error naming the likely cause, is counted in `rewards_kafka_producers_fenced_total` and is replaced
on its next use (which fences the other in turn: the count keeps climbing until the configuration is fixed).
"""

import asyncio
import contextlib
import socket
from dataclasses import dataclass, field

import structlog
from aiokafka.partitioner import murmur2
from prometheus_client import Counter

from rewards.adapters.production import process_index
from rewards.adapters.production.process_index import ProcessIndex
from rewards.ports import LogUnavailable
from schemas.topics import EVENTS_TOPIC, partition_key

log = structlog.get_logger(__name__)

PUBLISH_TIMEOUT_S = 4.0  # the whole publish: borrow a producer, begin, send, commit
ABORT_TIMEOUT_S = 1.0
STOP_TIMEOUT_S = 2.0
SETTLE_S = 1.0  # how long past a producer's deadline its publishes wait for its verdict
REQUEST_TIMEOUT_MS = 3000
TRANSACTION_TIMEOUT_MS = 10_000  # how long a lost producer's open transaction holds back read_committed readers
MAX_GROUP = 64  # publishes per transaction at most
MAX_BATCH_BYTES = 1024 * 1024  # a partition's messages of one transaction travel (and compress) together
MAX_REQUEST_BYTES = 8 * 1024 * 1024  # a 2 MB request body grows a little as records; lz4 shrinks it ~3-5x

FENCED = Counter(
    "rewards_kafka_producers_fenced_total",
    "Transactional producers fenced by another with the same id: two live ingest processes sharing an instance?",
)


class PublishFailed(LogUnavailable):
    """The records were not published (or it is unknown whether they were): the only exception `publish`
    raises besides cancellation, a LogUnavailable as the port says (the HTTP layer answers 503).

    `maybe_published`: True when the failure came during or after the commit (its outcome is unknown), or
    when the caller stopped waiting after a producer took the publish; False when the transaction surely
    was never committed (refused before its commit, or never taken by a producer)."""

    def __init__(self, message: str, *, maybe_published: bool):
        super().__init__(message)
        self.maybe_published = maybe_published


class _Slot:
    """One transactional id and the producer currently serving it (None: to be started on next use)."""

    def __init__(self, bootstrap: str, transactional_id: str):
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id
        self.producer = None

    async def ready(self):
        if self.producer is None:
            self.producer = await _start_producer(self.bootstrap, self.transactional_id)
        return self.producer

    def discard(self) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            _background(_stop(producer))


_Message = tuple[bytes, int | None, bytes]  # key, partition (None: by the key), payload


@dataclass(eq=False)
class _Publish:
    messages: list[_Message]  # all in one transaction
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    given_up: bool = False  # by its caller, before a producer took it: never to be sent
    deadline: float | None = None  # set when a producer takes it: the loop time its transaction ends by


@dataclass
class _Attempt:
    committing: bool = False  # commit_transaction() was sent: whether it went through is unknown until it answers


class KafkaEventLog:
    def __init__(self, slots: list[_Slot], index: ProcessIndex | None = None, shards: int = 1):
        self._slots = slots
        self.shards = shards  # the partitions one project's conversions spread over (EventLog.shards)
        self.partitions = shards  # the topic's (read at start)
        self._index = index  # holds this log's process index
        self.owner: str | None = None  # its transactional ids' prefix
        self._keeper: asyncio.Task | None = None
        self._waiting: asyncio.Queue[_Publish] = asyncio.Queue()
        self._committers: list[asyncio.Task] = []

    @classmethod
    async def start(
        cls, bootstrap: str, pool_size: int, instance: str | None = None, shards: int = 0
    ) -> "KafkaEventLog":
        """`shards`: how many partitions one project's conversions spread over (REWARDS_CONVERSION_SHARDS), from its
        own partition on; 0, all of the topic's (read at start: partitions added later are used after a restart)."""
        if instance is None:
            from rewards.settings import Settings

            instance = Settings().ingest_instance or socket.gethostname()
        # Stable across a restart (the restarted process fences the dead one), unique among live ones.
        index = ProcessIndex.claim(instance)
        prefix = f"rewards-ingest-{instance}-{index.index}"
        event_log = cls([_Slot(bootstrap, f"{prefix}-{i}") for i in range(pool_size)], index)
        event_log.owner = prefix  # what a restarted process of this index fences (runtime.wiring.retire_predecessor)
        log.info("kafka transactional ids", transactional_ids=f"{prefix}-{{0..{pool_size - 1}}}")
        # Start them all now: a broker that is unreachable at start-up fails the process at once.
        results = await asyncio.gather(*(slot.ready() for slot in event_log._slots), return_exceptions=True)
        errors = [result for result in results if isinstance(result, BaseException)]
        if errors:
            await event_log.close()
            raise errors[0]
        try:
            partitions = len(await event_log._slots[0].producer.partitions_for(EVENTS_TOPIC))
        except BaseException:
            await event_log.close()
            raise
        event_log.partitions = partitions
        event_log.shards = max(1, min(shards, partitions) if shards else partitions)
        event_log._committers = [asyncio.create_task(event_log._commit_groups(slot)) for slot in event_log._slots]
        event_log._keeper = asyncio.create_task(_keep(index))
        return event_log

    async def publish(self, project_id: str, payload: bytes) -> None:
        await self._publish([(partition_key(project_id), None, payload)])

    async def publish_shards(self, project_id: str, payloads: dict[int, bytes]) -> None:
        key = partition_key(project_id)  # still the project's id, for consumers: the partition is given
        await self._publish(
            [(key, self.partition_of(project_id, shard), payload) for shard, payload in payloads.items()]
        )

    def partition_of(self, project_id: str, shard: int) -> int:
        """The partition of a project's shard: the project's own partition (where its other records go, by Kafka's
        default partitioner) for shard 0, the next ones for the others."""
        return ((murmur2(partition_key(project_id)) & 0x7FFFFFFF) + shard) % self.partitions

    async def _publish(self, messages: list[_Message]) -> None:
        publish = _Publish(messages)
        self._waiting.put_nowait(publish)
        try:
            await _outcome(publish)
        except asyncio.CancelledError:
            publish.given_up = True
            raise

    async def close(self) -> None:
        for task in (*self._committers, self._keeper):
            if task is not None:
                task.cancel()
        await asyncio.gather(*self._committers, *([self._keeper] if self._keeper else []), return_exceptions=True)
        while not self._waiting.empty():
            _settle([self._waiting.get_nowait()], PublishFailed("the event log is closing", maybe_published=False))
        producers = [slot.producer for slot in self._slots if slot.producer is not None]
        for slot in self._slots:
            slot.producer = None
        await asyncio.gather(*(_stop(producer) for producer in producers), *_stopping)
        index, self._index = self._index, None
        if index is not None:
            index.release()  # the index is free for the next event log of this instance

    async def _commit_groups(self, slot: _Slot) -> None:
        while True:
            group = [await self._waiting.get()]
            while len(group) < MAX_GROUP and not self._waiting.empty():
                group.append(self._waiting.get_nowait())
            group = [publish for publish in group if not publish.given_up]
            if not group:
                continue
            deadline, attempt = asyncio.get_running_loop().time() + PUBLISH_TIMEOUT_S, _Attempt()
            for publish in group:
                publish.deadline = deadline
            try:
                await _publish(slot, [message for publish in group for message in publish.messages], deadline, attempt)
            except PublishFailed as exc:
                _settle(group, exc)
            except asyncio.CancelledError:
                _settle(group, PublishFailed("the event log is closing", maybe_published=attempt.committing))
                raise
            else:
                _settle(group, None)


async def _outcome(publish: _Publish) -> None:
    """Wait for `publish` to be settled, or give up: at once if no producer took it by PUBLISH_TIMEOUT_S
    (surely not published), else once its producer's deadline is past (then it may have been)."""
    try:
        async with asyncio.timeout(PUBLISH_TIMEOUT_S):
            return await asyncio.shield(publish.done)
    except TimeoutError as exc:
        if publish.deadline is None:
            publish.given_up = True
            message = f"no Kafka producer took it within {PUBLISH_TIMEOUT_S} s"
            raise PublishFailed(message, maybe_published=False) from exc
    try:
        async with asyncio.timeout_at(publish.deadline + SETTLE_S):
            return await asyncio.shield(publish.done)
    except TimeoutError as exc:
        publish.given_up = True
        raise PublishFailed(f"not committed to Kafka within {PUBLISH_TIMEOUT_S} s", maybe_published=True) from exc


def _settle(group: list[_Publish], error: Exception | None) -> None:
    for publish in group:
        if publish.done.done() or publish.given_up:  # nobody waits for the outcome any more
            continue
        if error is None:
            publish.done.set_result(None)
        else:
            publish.done.set_exception(error)


async def _publish(slot: _Slot, messages: list[_Message], deadline: float, attempt: _Attempt) -> None:
    producer = None
    try:
        async with asyncio.timeout_at(deadline):
            producer = await slot.ready()
            await producer.begin_transaction()
            try:
                sent = [
                    await producer.send(EVENTS_TOPIC, payload, key=key, partition=partition)
                    for key, partition, payload in messages
                ]
                await asyncio.gather(*sent)
            except Exception:  # not on a timeout: the time is up, the producer is replaced instead
                await _abort(slot, producer)
                # Replaced even when the abort succeeded: after a refused send (e.g. a message too large) the
                # producer's sequence numbers are off, and its next transaction would fail another request.
                slot.discard()
                raise
            attempt.committing = True
            await producer.commit_transaction()
    except Exception as exc:
        if producer is not None and slot.producer is producer and not _ready_for_next(producer):
            slot.discard()
        if _fenced(exc):
            FENCED.inc()
            log.error(
                "kafka producer fenced: another producer started with its transactional id. Most likely another"
                " live ingest process has the same REWARDS_INGEST_INSTANCE (each live process needs its own),"
                " else this process stalled past the transaction timeout. Replaced on its next use.",
                transactional_id=slot.transactional_id,
            )
            if slot.producer is producer:
                slot.discard()
        log.warning(
            "kafka publish failed",
            transactional_id=slot.transactional_id,
            error=repr(exc),
            maybe_published=attempt.committing,
        )
        raise PublishFailed(f"publishing to Kafka failed: {exc!r}", maybe_published=attempt.committing) from exc
    except asyncio.CancelledError:
        # Cancelled mid-transaction (e.g. the request was dropped): its state is unknown.
        slot.discard()
        raise


async def _abort(slot: _Slot, producer) -> None:
    try:
        async with asyncio.timeout(ABORT_TIMEOUT_S):
            await producer.abort_transaction()
    except Exception:
        slot.discard()


async def _keep(index: ProcessIndex) -> None:
    while True:
        await asyncio.sleep(process_index.KEEP_S)
        try:
            index.keep()
        except OSError:
            log.exception("keeping the process index lock file failed", path=index.path)


def _fenced(exc: BaseException) -> bool:
    from aiokafka.errors import InvalidProducerEpoch, ProducerFenced

    for _ in range(10):  # the exception and what it was raised from
        if isinstance(exc, ProducerFenced | InvalidProducerEpoch):
            return True
        exc = exc.__cause__ or exc.__context__
        if exc is None:
            return False
    return False


def _ready_for_next(producer) -> bool:
    # A producer is fit for another transaction only in the READY state (no transaction open or ending).
    from aiokafka.producer.transaction_manager import TransactionState

    manager = producer._txn_manager
    return manager is not None and manager.state == TransactionState.READY


async def _start_producer(bootstrap: str, transactional_id: str):
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=transactional_id,
        enable_idempotence=True,
        acks="all",
        compression_type="lz4",  # gzip (level 9 in aiokafka) cost ~5% of the ingest process's CPU
        max_batch_size=MAX_BATCH_BYTES,
        max_request_size=MAX_REQUEST_BYTES,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
    )
    try:
        async with asyncio.timeout(PUBLISH_TIMEOUT_S):
            await producer.start()
    except BaseException:
        await _stop(producer)
        raise
    return producer


async def _stop(producer) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(STOP_TIMEOUT_S):
            await producer.stop()


_stopping: set[asyncio.Task] = set()


def _background(coroutine) -> None:
    task = asyncio.create_task(coroutine)
    _stopping.add(task)  # keep a reference until it ends
    task.add_done_callback(_stopping.discard)
