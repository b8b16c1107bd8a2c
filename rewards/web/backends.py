"""The adapters an HTTP process runs with, chosen once at start-up (runtime.wiring) and shared by every request."""

from dataclasses import dataclass

from starlette.requests import Request

from rewards.ports import (
    AffiliateFigures,
    CodeFigures,
    CodeTrafficFigures,
    EventLog,
    EventSource,
    StateStore,
    Warehouse,
    WebhookSender,
)
from rewards.settings import Settings
from rewards.web.backpressure import Backpressure
from rewards.web.ratelimit import RateLimiter


@dataclass
class Backends:
    settings: Settings
    state: StateStore
    log: EventLog | None  # None in processes that never publish (the query API)
    source: EventSource | None
    warehouse: Warehouse | None
    limiter: RateLimiter
    backpressure: Backpressure | None = None  # in processes that accept events
    figures: AffiliateFigures | None = None  # affiliates' figures so far, for the ingest edge's registrations
    traffic: CodeTrafficFigures | None = None  # referral codes' clicks and attributions (tracking events)
    code_figures: CodeFigures | None = None  # referral codes' referred users and earnings (the warehouse's code_stats)
    webhook_sender: WebhookSender | None = None  # calls of the projects' webhook URLs (API.md §10)

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
        if self.webhook_sender is not None:
            await self.webhook_sender.close()


def backends_of(request: Request) -> Backends:
    return request.app.state.backends
