"""The production shape's stream workers: a faust app writing `rewards.events` into ClickHouse.

Exactly-once effect, from at-least-once delivery:

- Only committed records are read: faust sets read_committed only with its exactly_once guarantee, so
  our consumer thread sets it, and the first batch checks it on aiokafka's fetcher (the worker crashes
  otherwise). A batch whose publish was aborted, or whose producer died mid-transaction, is never seen.
- Up to `worker_batch_size` messages are taken at a time (waiting `worker_batch_wait_s` at most) and,
  per partition, cut into deliveries of at most `worker_batch_size` records. Before a delivery starting at
  offset `first` is written, its last offset is recorded as a plan (`stream_workers.plans`); a delivery
  read again after a crash (written, offsets not yet committed) follows the recorded plan, so it has
  the same records and the same token `{topic}:{partition}:{first}-{last}`, and ClickHouse's
  `insert_deduplication_token` drops the repeated inserts. The processor then marks its conversions
  processed, so a record published twice (in two deliveries) is written once too.
- Each partition's deliveries are written in order by a lane of its own, up to AT_ONCE partitions' at the same
  time, and its offset is committed (`last + 1`) once its delivery is written (lanes finishing together, in one
  commit), so a worker taking over always starts where a plan starts. A delivery waiting for another partition's
  records (a reversal before its event: schemas.topics) pauses its own lane only. Faust's own ack-based commits are
  off for the topic: on a transactional topic they count the offsets of commit markers twice and can commit an offset
  inside a delivery, whose rest would then be written again under another token. A commit that fails
  (or is not done within `commit_timeout_s`) is fatal: the process exits 1, to be restarted, and the
  delivery is read again and written once.
  A failed delivery is retried, with backoff and a log line, never skipped; a crash at any point
  leaves it uncommitted, to be read again (at least once) and written once (the token).

Continuity: faust can lose messages of a partition across a rebalance (those fetched while its flow is suspended are
dropped, and its recovery seeks back only to committed offsets above 0, so a partition kept by the same worker may go
on past them: accepted events never written, found by tests/runtime/test_production_faults.py under joins and kills).
So at each new generation of the group every queue is dropped and messages fetched in an older generation are
ignored; before a partition's first delivery of the generation is planned, its first queued message is checked
against the log (rewards.adapters.production.kafka_positions: the first record at the group's committed offset),
and if records are missing the partition is read again from the committed offset (`rewards_worker_rewinds_total`,
a warning). A partition idle for IDLE_S while the log holds a record past its committed offset (a lost message with
none after it) is read again the same way (`Pipeline.watch`).

Faust keeps no state of its own here (no tables, no leader topic, round-robin assignment, a throwaway
data directory), and the processor is the embedded default's (`stream_workers.processor.process_delivery`).
Worker processes share the partitions as one consumer group; a rebalance seeks every partition back to
its committed offset, and anything not committed is read again and follows its plans. A new worker
gets its partitions in about a second; a dead one's move after `session_timeout_s`.
"""

import asyncio
import contextlib
import io
import itertools
import os
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, NoReturn, Protocol

import faust
import structlog
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from prometheus_client import Counter, Gauge
from pydantic_settings import BaseSettings, SettingsConfigDict

from rewards.ports import DeadLetterLog, PlanStore, StateStore, Warehouse, WriterHold
from rewards.settings import Settings
from schemas.topics import EVENTS_TOPIC
from stream_workers.batches import Batch, Message, Planner
from stream_workers.erasures import EraseWarehouse, run_erasures
from stream_workers.handlers.base import Waiting
from stream_workers.processor import DEFAULT_WINDOW_S, process_delivery
from stream_workers.runner import DELIVERIES, FAILURES, LATENCY, PAYOUTS, freeze_startup_objects

log = structlog.get_logger(__name__)

# Deliveries written at the same time (each a partition's lane's): each holds up to worker_batch_size records in
# memory (~75 MB at 10,000), so the process's peak grows with it.
AT_ONCE = 4
RETRY_FIRST_S = 0.2
RETRY_MAX_S = 10.0

# A partition of this worker that got no message and had nothing to write for IDLE_S while the log holds a record past
# its committed offset is read again from there (Pipeline.watch): a message faust dropped with none after it.
WATCH_EVERY_S, IDLE_S = 5.0, 30.0
LONG_WRITE_S = 60.0  # a delivery written longer is logged with its lane's stack (Pipeline.watch)
WAIT_FIRST_S, WAIT_MAX_S = 0.02, 1.0  # between tries of a delivery waiting for another partition's records
WAIT_LOG_S = 30.0

WAITING = Gauge(
    "rewards_worker_waiting_deliveries",
    "Deliveries waiting for another partition's records to be written (a reversal before its event, spread by user)",
)
COMMIT_FAILURES = Counter("rewards_worker_commit_failures_total", "Offset commits that failed (each stops the worker)")
REWINDS = Counter(
    "rewards_worker_rewinds_total",
    "Partitions read again from their committed offset: messages were missing after a rebalance (Pipeline._resumes)",
)


class Positions(Protocol):
    """Where a partition truly resumes (rewards.adapters.production.kafka_positions.KafkaPositions)."""

    async def resume_point(self, partition: int) -> int: ...

    async def first_record(self, partition: int, offset: int) -> int | None: ...

    async def close(self) -> None: ...


class WorkerOptions(BaseSettings):
    """The faust workers' own knobs (prefix REWARDS_WORKER_); batch size and wait are in `Settings`."""

    model_config = SettingsConfigDict(env_prefix="REWARDS_WORKER_")

    # sqlite: the embedded state store of REWARDS_DATA_DIR, shared by path (one machine: tests, trials)
    state: Literal["redis", "sqlite"] = "redis"
    # A dead worker's partitions move after this; Kafka's default floor (group.min.session.timeout.ms) is 6 s.
    session_timeout_s: float = 10.0
    # Static membership (e.g. the pod name): a restarted worker takes its partitions back without a rebalance.
    instance_id: str | None = None
    # After SIGTERM/SIGINT the process exits within this, even if stopping hangs (it does with the broker gone).
    stop_timeout_s: float = 15.0
    # An offset commit not done within this is a failed one (aiokafka retries it for as long as the broker
    # is unreachable): like any failed commit it stops the process, which exits 1 to be restarted.
    commit_timeout_s: float = 60.0
    # Prometheus metrics (deliveries, payouts, failures, delivery time) on http://0.0.0.0:PORT/metrics; 0: off.
    metrics_port: int = 0


@dataclass
class Resources:
    state: StateStore
    warehouse: Warehouse
    plans: PlanStore
    dead_letters: DeadLetterLog | None = None
    window_s: float = DEFAULT_WINDOW_S  # the dedup window (REWARDS_DEDUP_WINDOW)
    log_id: str = ""  # the Kafka cluster's id: delivery tokens and plans count offsets of this cluster
    # Every delivery's write takes a lease of it; an erasure holds them all still (stream_workers.erasures).
    hold: WriterHold | None = None
    caught_up: Callable[[], Awaitable[None]] | None = None  # returns once what the log holds now is written
    erase_warehouse: EraseWarehouse | None = None  # the warehouse's half of an erasure round
    erasure_gap_s: float = 300.0  # the least time between two of this process's erasure rounds
    # Where each partition truly resumes (rewards.adapters.production.kafka_positions): checked after each rebalance.
    positions: "Positions | None" = None

    async def close(self) -> None:
        for resource in (self.dead_letters, self.plans, self.warehouse, self.state, self.hold, self.positions):
            if resource is None:
                continue
            try:
                await resource.close()
            except Exception:
                log.exception("closing failed", resource=type(resource).__name__)


# -- read_committed ------------------------------------------------------------------------------------


class _ReadCommittedConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport):
        consumer = super()._create_worker_consumer(transport)
        # faust asks for read_committed only under processing_guarantee="exactly_once", which also moves
        # offset commits into producer transactions; we want read_committed with plain commits.
        consumer._isolation_level = "read_committed"
        return consumer


class _Consumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self):
        return _ReadCommittedConsumerThread(self, loop=self.loop, beacon=self.beacon)


class _Transport(faust_aiokafka.Transport):
    Consumer = _Consumer


class WorkersApp(faust.App):
    def _new_transport(self):
        return _Transport(self.conf.broker_consumer, self)


def isolation_level(app: faust.App) -> str:
    """The isolation level the running Kafka consumer fetches with (read from aiokafka's fetcher)."""
    from aiokafka.consumer.fetcher import READ_COMMITTED

    fetcher = app.consumer._thread._consumer._fetcher
    return "read_committed" if fetcher._isolation_level == READ_COMMITTED else "read_uncommitted"


# -- the app -------------------------------------------------------------------------------------------


def faust_settings(bootstrap: str, options: WorkerOptions) -> dict:
    session = options.session_timeout_s
    return {
        "broker": [f"kafka://{server.strip()}" for server in bootstrap.split(",")],
        "store": "memory://",
        "autodiscover": False,
        "web_enabled": False,
        "topic_disable_leader": True,
        "table_standby_replicas": 0,  # with no tables: plain round-robin assignment
        "consumer_auto_offset_reset": "earliest",
        "consumer_group_instance_id": options.instance_id,
        "broker_session_timeout": session,
        "broker_heartbeat_interval": max(session / 5, 0.5),
        "broker_rebalance_timeout": session,
        "broker_request_timeout": max(session, 30.0),
        # Nothing is ever acked (the pipeline commits): never wait for acks at a rebalance or a stop.
        "stream_wait_empty": False,
    }


def build_app(
    settings: Settings,
    options: WorkerOptions,
    opener: Callable[[], Awaitable[Resources]],
    datadir: str | None = None,
) -> faust.App:
    """`opener`: what opens the workers' resources (runtime.wiring.open_worker_resources), retried until it
    succeeds."""
    conf = faust_settings(settings.kafka_bootstrap_servers, options)
    app = WorkersApp(settings.worker_group_id, **conf, **({"datadir": datadir} if datadir else {}))
    # acks=False: faust never commits this topic's offsets; the pipeline commits them at delivery boundaries.
    topic = app.topic(
        EVENTS_TOPIC, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw", acks=False
    )

    @app.agent(topic)
    async def write_events(stream):
        resources = await retrying("opening the state store and warehouse", opener)
        planner = Planner(resources.plans, settings.worker_batch_size, resources.log_id)
        pipeline = Pipeline(app, resources, planner, options)
        pipeline.max_queued = settings.worker_batch_size
        erasing = _erasing(resources)
        watching = asyncio.create_task(pipeline.watch())
        freeze_startup_objects()
        try:
            async for events in stream.take_events(settings.worker_batch_size, within=settings.worker_batch_wait_s):
                await pipeline.write(events)
        finally:
            for task in (erasing, watching):
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            await pipeline.stop()
            await resources.close()

    return app


class _Leased:
    """The warehouse, each insert made only while the write's lease holds (rewards.adapters.production.writer_hold:
    a lease gone stale raises before the insert, and the delivery is retried under a new one)."""

    def __init__(self, warehouse: Warehouse, lease):
        self._warehouse, self._lease = warehouse, lease

    async def insert(self, table: str, rows: list[dict], dedup_token: str) -> None:
        await self._lease.ensure()
        await self._warehouse.insert(table, rows, dedup_token)

    def __getattr__(self, name: str):
        return getattr(self._warehouse, name)


def _erasing(resources: Resources) -> asyncio.Task | None:
    """Every worker process runs the erasure rounds; one at a time holds the writers (the others find it held)."""
    if resources.hold is None or resources.erase_warehouse is None:
        return None
    return asyncio.create_task(
        run_erasures(
            resources.state,
            resources.erase_warehouse,
            resources.hold.held,
            asyncio.Event(),
            resources.caught_up,
            resources.erasure_gap_s,
        )
    )


class Pipeline:
    """One lane per partition with messages: each writes its partition's deliveries one after the other and commits
    each (commits of lanes finishing together go in one request); up to AT_ONCE deliveries are written at the same
    time. A lane whose delivery waits for another partition (stream_workers.handlers.base.Waiting) pauses its
    partition's fetching and tries again shortly, the other lanes going on meanwhile: a wait never holds back the
    partition it waits for, whichever worker holds it."""

    def __init__(self, app: faust.App, resources: Resources, planner: Planner, options: WorkerOptions):
        self._app = app
        self._options = options
        self._resources = resources
        self._planner = planner
        self._checked = False
        self._lanes: dict[tuple[str, int], asyncio.Task] = {}
        self._writing = asyncio.Semaphore(AT_ONCE)
        self._waiting: set[tuple[str, int]] = set()  # partitions whose delivery waits (paused)
        self._progress = asyncio.Event()  # set as lanes write deliveries or end
        self._to_commit: dict[tuple[str, int], Batch] = {}
        self._committing = asyncio.Lock()
        self.max_queued = 1  # messages queued for busy lanes before `write` waits (the stream's take size)
        self._generation: int | None = None  # the consumer group generation of the messages queued
        self._unchecked: set[tuple[str, int]] = set()  # partitions whose resume point is not checked yet
        self._active: dict[tuple[str, int], float] = {}  # when each partition last got a message or was assigned
        self._started: dict[tuple[str, int], tuple[str, float]] = {}  # the delivery each lane writes, since when

    async def write(self, events) -> None:
        """Queue the events' messages and start their partitions' lanes; return once what is queued for lanes that
        are not waiting is at most `max_queued` messages (back-pressure: the stream is read on when there is room)."""
        if not self._checked:
            await self._check_read_committed()
        generation = self._app.consumer_generation_id
        if generation != self._generation:
            self._rebalanced(generation)
        # A message fetched before the rebalance is read again from the committed offset after it (_resumes).
        fresh = [_message(event) for event in events if event.message.generation_id == generation]
        self._planner.add(fresh)
        self._planner.keep_only(self._assigned())
        now = time.monotonic()
        self._active.update((message.tp, now) for message in fresh)
        for tp in self._planner.partitions():
            if tp not in self._lanes:
                self._lanes[tp] = asyncio.create_task(self._lane(tp))
        while self._busy_queued() > self.max_queued:
            self._progress.clear()
            await self._progress.wait()

    async def stop(self) -> None:
        lanes = list(self._lanes.values())
        for lane in lanes:
            lane.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)

    def _rebalanced(self, generation: int) -> None:
        """A new generation of the group: every partition's queue dropped (read again from its committed offset), and
        where each resumes checked before anything of it is written (_resumes)."""
        self._generation = generation
        for tp in self._planner.partitions():
            self._planner.forget(tp)
        self._unchecked = set(self._assigned())
        self._active = dict.fromkeys(self._unchecked, time.monotonic())

    async def _resumes(self, tp: tuple[str, int]) -> bool:
        """Whether the partition's queue starts where the group resumes it. faust may drop messages around a
        rebalance and go on past them (rewards.adapters.production.kafka_positions): then the first record at or
        after the committed offset comes before the queue's first, and the partition is read again from the
        committed offset (its queue dropped; the lane ends, and starts again as the messages come)."""
        positions = self._resources.positions
        if positions is None or tp not in self._unchecked:
            return True
        first = self._planner.first_offset(tp)
        if first is None:
            return True
        committed = await retrying("reading the committed offset", lambda: positions.resume_point(tp[1]))
        found = await retrying("reading the log", lambda: positions.first_record(tp[1], committed))
        if found is not None and found < first:
            why = "messages missing after a rebalance"
            await self._rewind(tp, committed, why, missing_from=found, queued_from=first)
            return False
        self._unchecked.discard(tp)
        log.info("partition resumes where committed", topic=tp[0], partition=tp[1], committed=committed, first=first)
        return True

    async def _rewind(self, tp: tuple[str, int], committed: int, why: str, **context) -> None:
        """Read the partition again from its committed offset (what is queued of it dropped)."""
        REWINDS.inc()
        log.warning(f"{why}; reading the partition again from its committed offset", topic=tp[0], partition=tp[1],
                    committed=committed, **context)  # fmt: skip
        self._planner.forget(tp)
        self._active[tp] = time.monotonic()
        await self._app.consumer.seek(TP(*tp), committed)

    async def watch(self) -> None:
        """Every WATCH_EVERY_S, the partitions idle for IDLE_S checked against the log (_rewind_idle); a failed check
        is logged and tried again next time."""
        while True:
            await asyncio.sleep(WATCH_EVERY_S)
            self._report_long_writes()
            try:
                await self._rewind_idle()
            except Exception:
                FAILURES.inc()
                log.exception("checking idle partitions against the log failed; trying again")

    def _report_long_writes(self) -> None:
        """A delivery written for LONG_WRITE_S or more (not waiting for another partition: that has its own lines) is
        logged with where its lane stands, every LONG_WRITE_S while it lasts: a write that hangs is never silent."""
        now = time.monotonic()
        for tp, (token, since) in list(self._started.items()):
            lasted = now - since
            if tp in self._waiting or lasted < LONG_WRITE_S or lasted % LONG_WRITE_S >= WATCH_EVERY_S:
                continue
            lane = self._lanes.get(tp)
            stack = io.StringIO()
            if lane is not None:
                lane.print_stack(file=stack)
            log.warning("a delivery is still being written", token=token, seconds=round(lasted), stack=stack.getvalue())

    async def _rewind_idle(self) -> None:
        """A partition with no lane, nothing queued and no message for IDLE_S is read again from its committed offset
        if the log holds a record there: a message faust lost with none after it would otherwise wait forever."""
        positions, now = self._resources.positions, time.monotonic()
        if positions is None:
            return
        if self._app.consumer_generation_id != self._generation:
            self._rebalanced(self._app.consumer_generation_id)  # (no message came since the rebalance)
        if self._busy_queued() > self.max_queued:
            return  # `write` holds the stream back: messages may wait in faust's buffers meanwhile
        for tp in sorted(self._assigned()):
            if not self._idle(tp, now):
                continue
            committed = await positions.resume_point(tp[1])
            found = await positions.first_record(tp[1], committed)
            if found is not None and self._idle(tp, now):  # (nothing came meanwhile)
                await self._rewind(tp, committed, "a record past the committed offset was never received", found=found)
            elif found is None:
                self._active[tp] = now  # checked: look again after another IDLE_S

    def _idle(self, tp: tuple[str, int], now: float) -> bool:
        """No lane, nothing queued, and no message since IDLE_S before `now`."""
        quiet = now - self._active.setdefault(tp, now) >= IDLE_S
        return quiet and tp not in self._lanes and not self._planner.queued(tp)

    def _busy_queued(self) -> int:
        return sum(self._planner.queued(tp) for tp in self._lanes if tp not in self._waiting)

    async def _lane(self, tp: tuple[str, int]) -> None:
        try:
            while tp in self._assigned():
                added = self._planner.added(tp)
                async with self._writing:  # a delivery is planned (decoded) only once it has its turn: memory
                    if not await self._resumes(tp):
                        return
                    batch = await retrying("planning deliveries", lambda: self._planner.batch_of(tp))
                    if batch is None:
                        if self._planner.added(tp) == added:
                            return  # nothing more came meanwhile: `write` starts a lane again when it does
                        continue
                    if not await self._write(batch):
                        self._planner.forget(tp)
                        return
                self._planner.done(batch)
                await self._commit(batch)
                self._progress.set()
        except Exception as exc:  # a bug: the worker stops (exit 1) rather than leave the partition unread
            log.exception("a partition's lane failed; the worker stops", topic=tp[0], partition=tp[1])
            await self._app.crash(exc)
        finally:
            if self._lanes.get(tp) is asyncio.current_task():
                del self._lanes[tp]
            self._progress.set()

    async def _write(self, batch: Batch) -> bool:
        """Write one delivery, retrying until it is written (True) or its partition has moved away (False). Called
        holding a turn of `_writing`, given back while the delivery waits."""

        async def write():
            resources = self._resources
            # While an erasure holds the writers, this waits; each insert checks the write's lease (_Leased).
            holding = resources.hold.writing() if resources.hold is not None else contextlib.nullcontext()
            async with holding as lease:
                warehouse = resources.warehouse if lease is None else _Leased(resources.warehouse, lease)
                with LATENCY.time():
                    return await process_delivery(
                        batch.delivery, resources.state, warehouse, resources.dead_letters, resources.window_s
                    )

        waiting = _Wait(batch, self._app.consumer)
        self._started[batch.tp] = (batch.delivery.token, time.monotonic())
        try:
            while True:
                try:
                    payouts = await retrying(
                        "writing a delivery",
                        write,
                        still_wanted=lambda: batch.tp in self._assigned(),
                        passing=Waiting,
                        token=batch.delivery.token,
                    )
                    break
                except Waiting as reason:
                    self._waiting.add(batch.tp)
                    self._progress.set()  # `write` no longer counts this partition's queue
                    self._writing.release()
                    try:
                        await waiting.again(reason)
                    finally:
                        await _reacquire(self._writing)
                    if batch.tp not in self._assigned():
                        raise Abandoned("waiting") from None
        except Abandoned:
            log.warning("partition moved to another worker; delivery left to it", token=batch.delivery.token)
            return False
        finally:
            self._started.pop(batch.tp, None)
            if waiting.since is not None:
                self._waiting.discard(batch.tp)
                waiting.over(batch.tp in self._assigned())
        PAYOUTS.inc(payouts)
        DELIVERIES.inc()
        return True

    async def _commit(self, batch: Batch) -> None:
        """Commit the partition's offset past `batch`, with those of lanes finishing meanwhile, in one request."""
        self._to_commit[batch.tp] = batch
        async with self._committing:
            batches, self._to_commit = list(self._to_commit.values()), {}
            if batches:  # else committed by another lane's request
                await self._commit_offsets(batches)

    async def _commit_offsets(self, batches: list[Batch]) -> None:
        """Commit the written deliveries' partitions, in one request."""
        # Only ever a delivery's end: a worker taking over reads from there, where a plan starts.
        # (faust's own ack-based commits can land inside a delivery on a transactional topic.)
        assigned = self._assigned()
        offsets = {TP(*batch.tp): batch.last_offset + 1 for batch in batches if batch.tp in assigned}
        if len(offsets) < len(batches):
            # Moved while the delivery was written (a rebalance: a worker joined or left). faust would commit an
            # empty set of offsets, which aiokafka refuses, crashing the worker. The new holder reads it again, under
            # its plan.
            moved = [batch.delivery.token for batch in batches if batch.tp not in assigned]
            log.info("partition moved before its commit; the new holder reads the delivery again", tokens=moved)
        if not offsets:
            return
        consumer = self._app.consumer
        try:
            async with asyncio.timeout(self._options.commit_timeout_s):
                committed = await consumer._commit(offsets)
        except Exception as exc:  # a timeout too; a cancellation (the worker stopping) goes on
            await self._commit_failed(batches, exc)
        if not committed:
            # faust's consumer thread answers False when the group rebalanced under the commit (the partition's
            # new holder reads from the last commit: nothing to do), and when the commit failed in any other
            # way, after crashing itself with the error.
            failure = consumer._thread.crash_reason
            if failure is not None:
                await self._commit_failed(batches, failure)
            log.info("offsets not committed (partition moved); the new holder reads them again", offsets=offsets)

    async def _commit_failed(self, batches: list[Batch], error: BaseException) -> NoReturn:
        """A failed commit is fatal: a consumer going on after one could hide a broken commit path for long
        (nothing committed, and a restart reading all since the last commit again). The process exits 1
        instead, for its supervisor to restart it: the written delivery is then read again under its plan
        and written once (its token), so nothing is lost and nothing is paid twice."""
        COMMIT_FAILURES.inc()
        log.critical(
            "committing offsets failed; the worker exits (status 1) to be restarted, the delivery will be read "
            "again and written once",
            tokens=[batch.delivery.token for batch in batches],
            error=repr(error),
            exc_info=error,
        )
        # Stopping may never end (aiokafka's consumer cannot stop without its broker): leave in any case.
        _exit_within(self._options.stop_timeout_s)
        await self._app.crash(error)
        raise asyncio.CancelledError  # ends the agent; the crash stops the worker, which exits 1

    def _assigned(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self._app.consumer.assignment()}

    async def _check_read_committed(self) -> None:
        level = isolation_level(self._app)
        if level != "read_committed":
            await self._app.crash(RuntimeError(f"the Kafka consumer reads {level}; aborted batches would be written"))
            raise asyncio.CancelledError
        log.info("consumer isolation level verified", isolation_level=level)
        self._checked = True


async def _reacquire(semaphore: asyncio.Semaphore) -> None:
    """Take a turn of `semaphore` back. Shielded: cancelled meanwhile (the pipeline stopping), the caller's `async
    with` gives the turn back at once and the acquire still takes it when it comes, so the count stays right."""
    await asyncio.shield(semaphore.acquire())


class _Wait:
    """A delivery waiting for another partition's records: its partition's fetching paused meanwhile (what is queued
    stays bounded), counted in WAITING, logged when it starts and every WAIT_LOG_S while it lasts."""

    def __init__(self, batch: Batch, consumer):
        self._batch, self._consumer = batch, consumer
        self.since: float | None = None
        self._logged = 0.0
        self._delay = WAIT_FIRST_S

    async def again(self, reason: Waiting) -> None:
        now = time.monotonic()
        if self.since is None:
            self.since, self._logged = now, now
            WAITING.inc()
            self._consumer.pause_partitions([TP(*self._batch.tp)])
            log.info("delivery waits for another partition", token=self._batch.delivery.token, reason=str(reason))
        elif now - self._logged >= WAIT_LOG_S:
            self._logged = now
            log.warning(
                "delivery still waits for another partition",
                token=self._batch.delivery.token,
                reason=str(reason),
                waited_s=round(now - self.since, 1),
            )
        await asyncio.sleep(self._delay)
        self._delay = min(self._delay * 2, WAIT_MAX_S)

    def over(self, assigned: bool) -> None:
        WAITING.dec()
        if assigned:
            self._consumer.resume_partitions([TP(*self._batch.tp)])
        log.info("delivery waited", token=self._batch.delivery.token, waited_s=round(time.monotonic() - self.since, 3))


def _message(event) -> Message:
    message = event.message
    return Message(message.topic, message.partition, message.offset, message.value)


class Abandoned(Exception):
    """The work is no longer this worker's."""


async def retrying(
    what: str,
    action,
    still_wanted: Callable[[], bool] = lambda: True,
    passing: type[Exception] | tuple = (),
    **context,
):
    """`action()`'s result, tried again (with backoff, each failure counted and logged) until it succeeds; `passing`:
    exceptions that are not failures, raised to the caller."""
    delay = RETRY_FIRST_S
    for attempt in itertools.count(1):
        try:
            return await action()
        except passing:
            raise
        except Exception:
            FAILURES.inc()
            log.exception(f"{what} failed; retrying", attempt=attempt, retry_in_s=delay, **context)
        if not still_wanted():
            raise Abandoned(what)
        await asyncio.sleep(delay)
        delay = min(delay * 2, RETRY_MAX_S)


def check_environment() -> tuple[Settings, WorkerOptions]:
    """The settings the workers run with, or SystemExit naming what the environment lacks."""
    settings, options = Settings(), WorkerOptions()
    if not settings.kafka_bootstrap_servers or not settings.clickhouse_url:
        raise SystemExit("the workers need KAFKA_BOOTSTRAP_SERVERS and CLICKHOUSE_URL in the environment")
    if options.state == "redis" and not settings.redis_url:
        raise SystemExit("the workers need REDIS_URL (or REWARDS_WORKER_STATE=sqlite) in the environment")
    return settings, options


def run_workers(open_resources: Callable[[Settings, WorkerOptions], Awaitable[Resources]]) -> None:
    """`rewards workers`: run until SIGTERM/SIGINT, then commit what was written and leave the group."""
    from rewards.logging import configure_logging

    settings, options = check_environment()
    configure_logging(settings.log_level, settings.log_format)
    if options.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(options.metrics_port)
    # faust wants a data directory even without tables; nothing in it outlives the process.
    with tempfile.TemporaryDirectory(prefix="rewards-workers-") as datadir:
        app = build_app(settings, options, lambda: open_resources(settings, options), datadir=datadir)
        worker = _Worker(app, loglevel=settings.log_level.upper(), override_logging=False, quiet=True)
        worker.stop_timeout_s = options.stop_timeout_s
        worker.execute_from_commandline()


class _Worker(faust.Worker):
    stop_timeout_s = 15.0

    def _schedule_shutdown(self, signal) -> None:
        # With the broker gone, aiokafka's consumer fails to stop and faust waits for it forever. Nothing is
        # lost by leaving anyway: whatever was not committed is read again.
        if not self._signal_stop_time:
            timer = threading.Timer(self.stop_timeout_s, _exit_now, (self.stop_timeout_s,))
            timer.daemon = True
            timer.start()
        super()._schedule_shutdown(signal)


def _exit_within(timeout_s: float) -> None:
    timer = threading.Timer(timeout_s, _exit_now, (timeout_s,))
    timer.daemon = True
    timer.start()


def _exit_now(timeout_s: float) -> None:
    log.error("stopping took too long; exiting now (uncommitted deliveries will be read again)", timeout_s=timeout_s)
    os._exit(1)
