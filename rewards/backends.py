"""The adapters a process runs with, chosen once at start-up and shared by every request."""

from dataclasses import dataclass

from rewards.backpressure import Backpressure
from rewards.ports import EventLog, EventSource, StateStore, Warehouse
from rewards.ratelimit import RateLimiter
from rewards.settings import Settings


@dataclass
class Backends:
    settings: Settings
    state: StateStore
    log: EventLog | None  # None in processes that never publish (the query API)
    source: EventSource | None
    warehouse: Warehouse | None
    limiter: RateLimiter
    backpressure: Backpressure | None = None  # in processes that accept events

    async def close(self) -> None:
        close_log = getattr(self.log, "close", None)  # the embedded outbox closes with the state store
        if close_log is not None:
            await close_log()
        if self.backpressure is not None:
            await self.backpressure.close()
        if self.warehouse is not None:
            await self.warehouse.close()
        await self.limiter.close()
        await self.state.close()
