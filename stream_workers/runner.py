"""The worker loop over an EventSource: poll, write, commit; a failed delivery is retried, never skipped."""

import asyncio
import gc

import structlog
from prometheus_client import Counter, Histogram

from rewards.ports import EventSource, StateStore, Warehouse
from stream_workers.processor import DEFAULT_WINDOW_S, process_delivery

log = structlog.get_logger(__name__)

DELIVERIES = Counter("rewards_worker_deliveries_total", "Deliveries written to the warehouse")
PAYOUTS = Counter("rewards_worker_payouts_total", "Payout rows written to the warehouse")
FAILURES = Counter("rewards_worker_failures_total", "Deliveries that failed and will be retried")
LATENCY = Histogram("rewards_worker_delivery_seconds", "Time to write one delivery")

MAX_DELIVERIES = 50  # the embedded outbox writes up to 50 batches in one delivery
RETRY_DELAY_S = 1.0


# gc.set_threshold of a worker process: allocations before a young collection, then the older ones. A delivery
# allocates tens of thousands of objects that live until it is written; with Python's default (700, 10, 10) each was
# walked several times by the collector before it died (bench/workers.py: ~4% of the workers' CPU per event, more with
# caps and budgets, whose tallies live through the delivery).
GC_THRESHOLDS = (50_000, 50, 50)


def freeze_startup_objects() -> None:
    """Take every object alive now (modules, clients, configuration: the process's start-up) out of the garbage
    collector's reach, and make its collections rarer (GC_THRESHOLDS). A delivery's objects triggered full
    collections; each walked every object of the process: ~12 µs per event, more than decoding itself
    (bench/workers.py, production: decoding 19.5 → 8 µs/event CPU)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def run_worker(
    source: EventSource,
    state: StateStore,
    warehouse: Warehouse,
    stop: asyncio.Event,
    poll_timeout_s: float,
    window_s: float = DEFAULT_WINDOW_S,
    paused: asyncio.Lock | None = None,
) -> None:
    """`paused`: held by whoever needs the warehouse and the log's read position still for a moment (a backup of the
    embedded default); the worker polls, writes and commits under it, so that whoever holds it finds a delivery
    planned (read, not committed) only when one failed and waits to be tried again."""
    paused = paused or asyncio.Lock()
    log.info("worker started")
    freeze_startup_objects()
    while not stop.is_set():
        async with paused:
            try:
                deliveries = await source.poll(MAX_DELIVERIES, poll_timeout_s)
            except Exception:  # the worker never dies of one failure: it would stop every project's payouts
                FAILURES.inc()
                log.exception("reading the event log failed; retrying")
                deliveries = None
            if deliveries is not None:
                written = await _write(deliveries, state, warehouse, window_s)
                committed = await _commit(source, written)
        if deliveries is None or not committed or len(written) < len(deliveries):
            await asyncio.sleep(RETRY_DELAY_S)
    log.info("worker stopped")


async def _write(deliveries: list, state: StateStore, warehouse: Warehouse, window_s: float) -> list:
    """The deliveries written, in order, up to the first that failed (it and those after it are read again)."""
    written = []
    for delivery in deliveries:
        try:
            with LATENCY.time():
                PAYOUTS.inc(await process_delivery(delivery, state, warehouse, window_s=window_s))
        except Exception:
            FAILURES.inc()
            log.exception("delivery failed; it will be retried", token=delivery.token)
            break
        written.append(delivery)
    return written


async def _commit(source: EventSource, written: list) -> bool:
    if not written:
        return True
    try:
        await source.commit(written)
    except Exception:  # written under their tokens: read again, they are written once
        FAILURES.inc()
        log.exception("committing deliveries failed; they will be read again")
        return False
    DELIVERIES.inc(len(written))
    return True
