"""The webhook dispatcher (API.md §10): two loops that never wait on each other.

- The reader follows the log at its own pace (an EventSource of records the workers have written: its own consumer
  group on Kafka, the outbox's webhook feed embedded), turns them into deliveries (stream_workers.webhooks.events) and
  enqueues them in the state store (WebhookQueue, idempotent by `webhook-id`) before it commits its position: a crash
  anywhere reads the records again and enqueues nothing twice.
- The sender leases due deliveries (each endpoint its own queue, at most PER_ENDPOINT of its attempts in flight in this
  process), sends each signed, and settles what came of it: succeeded, due again on the schedule, or failed; an
  endpoint answering 410, or failing every attempt for 5 days, is disabled. A delivery whose attempt never settled (the
  process died) is leased again once its lease ends, under the same `webhook-id`.

A receiver that hangs holds at most PER_ENDPOINT attempts of its own for the sender's timeout; other endpoints' attempts
go on beside them, and the workers never wait for either loop (back-pressure counts the workers' lag only)."""

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import structlog
from prometheus_client import Counter, Gauge, Histogram

from rewards.domain import sealing
from rewards.domain import webhook_events as we
from rewards.domain.timestamps import now_ms
from rewards.domain.webhook_events import Delivery
from rewards.domain.webhooks import Endpoint
from rewards.ports import EventSource, StateStore, Warehouse, WebhookSender
from stream_workers.webhooks.events import Events

log = structlog.get_logger(__name__)

READ = Counter("rewards_webhook_records_read_total", "Records the webhook dispatcher read from the log")
ENQUEUED = Counter("rewards_webhook_deliveries_enqueued_total", "Webhook deliveries enqueued (new ones)")
ATTEMPTS = Counter("rewards_webhook_attempts_total", "Webhook delivery attempts, by outcome", ["outcome"])
ATTEMPT_SECONDS = Histogram("rewards_webhook_attempt_seconds", "Time of one webhook delivery attempt")
DISABLED = Counter("rewards_webhook_endpoints_disabled_total", "Endpoints disabled (410, or 5 days of failures)")
FAILURES = Counter("rewards_webhook_dispatcher_failures_total", "Dispatcher steps that failed and will be retried",
                   ["step"])  # fmt: skip
SKIPPED = Counter(
    "rewards_webhook_records_skipped_total",
    "Records whose webhook events could not be made after retries (logged with the project)",
)
PENDING = Gauge("rewards_webhook_deliveries_pending", "Webhook deliveries waiting to be sent (every project)")

MAX_DELIVERIES = 50  # log deliveries per read
PER_ENDPOINT = 4  # attempts of one endpoint in flight at once, in this process
MAX_IN_FLIGHT = 512  # attempts in flight at once, in this process
SETTLE_EVERY_S = 0.02  # attempts' outcomes are settled together (one state-store call for many)
COALESCE_S = 0.005  # an attempt's end waits this long for others before leasing again (one store call for several)
IDLE_S = 0.1  # nothing due: look again after this (an enqueue in this process wakes the sender at once)
ENDPOINTS_FRESH_S = 2.0  # the sender's view of an endpoint (its URL, secret, enabled) is at most this old
SWEEP_EVERY_S = 3600.0
GAUGE_EVERY_S = 10.0
RETRY_S = 1.0
MAX_TRIES = 5  # reads of the same records failing in a row before a failing project's records are skipped


@dataclass
class Settings:
    poll_timeout_s: float = 0.5
    secrets_keys: tuple[str, ...] = ()
    per_endpoint: int = PER_ENDPOINT
    max_in_flight: int = MAX_IN_FLIGHT
    lease_ms: int = we.LEASE_MS


class Subscriptions:
    """Each project's endpoints: the reader reads them afresh for each delivery (an endpoint made a moment before an
    event must get it); the sender's view is refreshed every ENDPOINTS_FRESH_S."""

    def __init__(self, state: StateStore):
        self._state = state
        self._cached: dict[str, tuple[float, list[Endpoint]]] = {}

    async def of(self, project_id: str, fresh: bool = False) -> list[Endpoint]:
        found = self._cached.get(project_id)
        if fresh or found is None or time.monotonic() - found[0] > ENDPOINTS_FRESH_S:
            found = (time.monotonic(), await self._state.list_webhooks(project_id))
            self._cached[project_id] = found
            if len(self._cached) > 100_000:  # bounded: the oldest reads go first
                del self._cached[next(iter(self._cached))]
        return found[1]

    async def endpoint(self, project_id: str, endpoint_id: str) -> Endpoint | None:
        return next((e for e in await self.of(project_id) if e.id == endpoint_id), None)

    def forget(self, project_id: str) -> None:
        self._cached.pop(project_id, None)


@dataclass
class Dispatcher:
    source: EventSource
    state: StateStore
    warehouse: Warehouse
    sender: WebhookSender
    settings: Settings = field(default_factory=Settings)

    def __post_init__(self):
        self.events = Events(self.warehouse)
        self.subscriptions = Subscriptions(self.state)
        self._due = asyncio.Event()  # set when this process enqueued something
        self._in_flight: dict[str, int] = {}
        self._attempts: set[asyncio.Task] = set()
        self._settled: list[Delivery] = []
        self._attempted = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        log.info("webhook dispatcher started")
        loops = [self.read(stop), self.send(stop), self.settle(stop), self.housekeep(stop)]
        await asyncio.gather(*loops)
        log.info("webhook dispatcher stopped")

    # -- the reader ------------------------------------------------------------------------------------------------

    async def read(self, stop: asyncio.Event) -> None:
        failed_tries = 0  # of the same deliveries in a row
        while not stop.is_set():
            try:
                deliveries = await self.source.poll(MAX_DELIVERIES, self.settings.poll_timeout_s)
                for delivery in deliveries:
                    await self.enqueue(delivery.records, skip_failing=failed_tries >= MAX_TRIES)
                if deliveries:
                    await self.source.commit(deliveries)
                failed_tries = 0
            except Exception:  # read again: enqueueing is idempotent
                failed_tries += 1
                FAILURES.labels("read").inc()
                log.exception("reading the log for webhooks failed; retrying", tries=failed_tries)
                await _pause(stop, RETRY_S * min(failed_tries, 10))

    async def enqueue(self, records: Sequence, skip_failing: bool = False) -> int:
        """Enqueue the deliveries of `records`. `skip_failing` (after MAX_TRIES of the same records): a project whose
        events cannot be made while the engines answer is skipped, logged and counted, so that one project's bad
        record never stops every other project's webhooks; otherwise the failure is raised and the records are read
        again (an engine down loses nothing)."""
        READ.inc(len(records))
        by_project: dict[str, list] = {}
        for record in records:
            if (project_id := getattr(record, "project_id", None)) is not None:
                by_project.setdefault(project_id, []).append(record)
        new = 0
        for project_id, project_records in by_project.items():
            try:
                new += await self._enqueue_project(project_id, project_records)
            except Exception:
                if not skip_failing or not await self._engines_answer():
                    raise  # an engine down: read again later, skip nothing
                SKIPPED.inc(len(project_records))
                log.exception("webhook events of a project's records skipped after retries", project=project_id,
                              records=len(project_records))  # fmt: skip
        if new:
            ENQUEUED.inc(new)
            self._due.set()
        return new

    async def _engines_answer(self) -> bool:
        try:
            await self.state.ping()
            await self.warehouse.query("SELECT 1")
        except Exception:
            return False
        return True

    async def _enqueue_project(self, project_id: str, records: list) -> int:
        endpoints = await self.subscriptions.of(project_id, fresh=True)
        if not endpoints:
            return 0
        deliveries = await self.events.deliveries(project_id, records, endpoints, now_ms())
        return await self.state.enqueue(deliveries) if deliveries else 0

    # -- the sender ------------------------------------------------------------------------------------------------

    async def send(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            room = self.settings.max_in_flight - len(self._attempts)
            leased: list[Delivery] = []
            if room > 0:
                try:
                    self._due.clear()
                    leased = await self.state.lease(
                        now_ms(), room, self.settings.per_endpoint, dict(self._in_flight), self.settings.lease_ms
                    )
                except Exception:
                    FAILURES.labels("lease").inc()
                    log.exception("leasing webhook deliveries failed; retrying")
                    await _pause(stop, RETRY_S)
                    continue
            for delivery in leased:
                self._in_flight[delivery.endpoint_id] = self._in_flight.get(delivery.endpoint_id, 0) + 1
                task = asyncio.create_task(self.attempt(delivery))
                self._attempts.add(task)
                task.add_done_callback(self._attempts.discard)
            await self._wait_for_work(stop)  # (a lease takes all it may now: room comes back as attempts end)
        if self._attempts:  # a stop lets attempts in flight finish (each is bounded by the sender's timeout)
            await asyncio.wait(list(self._attempts))

    async def _wait_for_work(self, stop: asyncio.Event) -> None:
        """Until something is due (an enqueue here, an attempt's end freeing room) or IDLE_S passed."""
        waits = [asyncio.ensure_future(e.wait()) for e in (self._due, self._attempted, stop)]
        self._attempted.clear()
        await asyncio.wait(waits, timeout=IDLE_S, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
        if self._attempted.is_set() and not (self._due.is_set() or stop.is_set()):
            await asyncio.sleep(COALESCE_S)  # the room of the attempts ending meanwhile, taken in the same lease

    async def attempt(self, delivery: Delivery) -> None:
        try:
            endpoint = await self._endpoint_of(delivery)
            if endpoint is None:  # deleted, and its deliveries with it
                return
            if not endpoint.enabled:
                ATTEMPTS.labels("endpoint_disabled").inc()
                self._settled.append(_not_sent(delivery, "endpoint disabled"))
                return
            secret = sealing.unseal(endpoint.sealed_secret, self.settings.secrets_keys).decode()
            with ATTEMPT_SECONDS.time():
                sent = await self.sender.send(endpoint.url, secret, delivery.id, delivery.body)
            ATTEMPTS.labels("succeeded" if sent.ok else "failed").inc()
            self._settled.append(we.after_attempt(delivery, sent.ok, sent.status_code, sent.error, now_ms()))
        except Exception:  # left leased: tried again once its lease ends
            FAILURES.labels("attempt").inc()
            log.exception("a webhook attempt failed", delivery=delivery.id, endpoint=delivery.endpoint_id)
        finally:
            left = self._in_flight.get(delivery.endpoint_id, 1) - 1
            if left:
                self._in_flight[delivery.endpoint_id] = left
            else:
                self._in_flight.pop(delivery.endpoint_id, None)
            self._attempted.set()

    async def _endpoint_of(self, delivery: Delivery) -> Endpoint | None:
        """The delivery's endpoint; one not in the cached list was made since (read afresh) or deleted: then a
        delivery enqueued while the deletion forgot the others goes the same way (else it would be leased forever)."""
        found = await self.subscriptions.endpoint(delivery.project_id, delivery.endpoint_id)
        if found is not None:
            return found
        self.subscriptions.forget(delivery.project_id)
        if (found := await self.subscriptions.endpoint(delivery.project_id, delivery.endpoint_id)) is None:
            await self.state.forget_endpoint(delivery.project_id, delivery.endpoint_id)
            ATTEMPTS.labels("endpoint_deleted").inc()
        return found

    async def settle(self, stop: asyncio.Event) -> None:
        while not (stop.is_set() and not self._attempts and not self._settled):
            await asyncio.sleep(SETTLE_EVERY_S)
            if not self._settled:
                continue
            batch, self._settled = self._settled, []
            try:
                failing = await self.state.settle(batch, now_ms())
            except Exception:  # settled again with the next ones (or leased again once their lease ends)
                FAILURES.labels("settle").inc()
                log.exception("settling webhook attempts failed; retrying")
                if stop.is_set():
                    return  # stopping: their leases end, and they are tried again
                self._settled = batch + self._settled
                await _pause(stop, RETRY_S)
                continue
            await self._disable(batch, failing)

    async def _disable(self, batch: list[Delivery], failing: dict[str, int | None]) -> None:
        """Endpoints that answered 410, or failed every attempt for 5 days, disabled."""
        now = now_ms()
        last = {d.endpoint_id: d for d in batch}
        for endpoint_id, since in failing.items():
            delivery = last[endpoint_id]
            if not we.disables(delivery.last_status_code, since, now):
                continue
            endpoint = await self.subscriptions.endpoint(delivery.project_id, endpoint_id)
            if endpoint is not None and endpoint.enabled:
                await self.state.put_webhook(delivery.project_id, endpoint.with_changes(enabled=False))
                self.subscriptions.forget(delivery.project_id)
                DISABLED.inc()
                log.warning("webhook endpoint disabled", project=delivery.project_id, endpoint=endpoint_id,
                            status_code=delivery.last_status_code)  # fmt: skip

    # -- housekeeping -----------------------------------------------------------------------------------------------

    async def housekeep(self, stop: asyncio.Event) -> None:
        swept_at = 0.0
        while not stop.is_set():
            try:
                PENDING.set(await self.state.pending_deliveries())
                if time.monotonic() - swept_at > SWEEP_EVERY_S:
                    swept_at = time.monotonic()
                    if swept := await self.state.sweep_deliveries(now_ms()):
                        log.info("finished webhook deliveries let go", deliveries=swept)
            except Exception:
                FAILURES.labels("housekeeping").inc()
                log.exception("webhook housekeeping failed; retrying")
            await _pause(stop, GAUGE_EVERY_S)


def _not_sent(delivery: Delivery, reason: str) -> Delivery:
    return replace(delivery, status=we.FAILED, next_attempt_ms=None, last_error=reason)


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


@contextlib.asynccontextmanager
async def running_dispatcher(dispatcher: Dispatcher):
    """The dispatcher as tasks beside another process's event loop (the embedded default)."""
    stop = asyncio.Event()
    task = asyncio.create_task(dispatcher.run(stop))
    try:
        yield task
    finally:
        stop.set()
        await task
