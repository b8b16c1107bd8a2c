"""Back-pressure: while the workers are too far behind, the ingest edge refuses new events (503, `Retry-After`)
instead of accepting them into a backlog whose freshness would grow without bound. Producers slow down; state
changes (codes, affiliates, claim checks) are never refused for it, they are few.

The backlog is what the event log holds that the workers have not written yet, in messages (one per accepted
batch or state change): Kafka's consumer lag of the workers' group (rewards.adapters.production.kafka_lag), or the
embedded outbox's rows. It is measured at most once per `refresh_s` per process, so a burst may pass the bound
by what one process accepts in that time.
"""

import asyncio
import time
from typing import Protocol

import structlog
from prometheus_client import Counter, Gauge

from rewards.ports import Unavailable

log = structlog.get_logger(__name__)

BACKLOG = Gauge(
    "rewards_pipeline_backlog",
    "Messages on the event log not yet written by the workers (Kafka consumer lag, or the embedded outbox's rows)",
)
REFUSED = Counter("rewards_backpressure_refusals_total", "Event batches refused (503): the backlog passed its bound")
MEASURE_FAILURES = Counter("rewards_backlog_measure_failures_total", "Failed measures of the backlog")


class BacklogSource(Protocol):
    async def backlog(self) -> int:
        """Messages published and not yet written by the workers."""


class Backlogged(Unavailable):
    """The workers are too far behind: nothing of the batch was accepted."""

    def __init__(self, backlog: int, bound: int):
        super().__init__(f"the pipeline is {backlog} messages behind (bound {bound}): nothing accepted, retry later")
        self.answer = f"Service Unavailable: {self}"


class Backpressure:
    def __init__(self, source: BacklogSource, bound: int, refresh_s: float = 1.0, owns_source: bool = False):
        """`owns_source`: close the source with this (a Kafka lag reader); the embedded outbox closes elsewhere."""
        self._source, self._bound, self._refresh_s, self._owns = source, bound, refresh_s, owns_source
        self._measured, self._at = 0, float("-inf")
        self._lock = asyncio.Lock()

    async def admit(self) -> None:
        """Raise Backlogged when the last measure (at most `refresh_s` old) passes the bound (0: no bound)."""
        if self._bound <= 0:
            return
        backlog = await self.backlog()
        if backlog > self._bound:
            REFUSED.inc()
            raise Backlogged(backlog, self._bound)

    async def backlog(self) -> int:
        if time.monotonic() - self._at >= self._refresh_s:
            async with self._lock:  # one measure at a time; requests waiting meanwhile take its result
                if time.monotonic() - self._at >= self._refresh_s:
                    await self._measure()
        return self._measured

    async def close(self) -> None:
        if self._owns:
            await self._source.close()

    async def _measure(self) -> None:
        try:
            self._measured = await self._source.backlog()
        except Exception:
            # The last measure stands: a log that cannot be measured fails its publishes anyway (503).
            MEASURE_FAILURES.inc()
            log.warning("measuring the backlog failed", exc_info=True)
        else:
            BACKLOG.set(self._measured)
        self._at = time.monotonic()
