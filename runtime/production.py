"""An HTTP service of the production shape: its routers on the production adapters. One that publishes also
runs the outbox relay (rewards.adapters.production.outbox_relay), for the state changes its requests did not publish.
Each keeps the API keys it resolved in a short-lived cache, dropped when a key changes anywhere
(RedisStateStore.follow_key_changes)."""

import contextlib
import gc

import structlog
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from rewards.adapters.production.outbox_relay import OutboxRelay
from rewards.logging import configure_logging
from rewards.settings import Settings
from rewards.web.app import create_app
from rewards.web.handlers import unavailable_answer
from runtime.wiring import claim_expiry_sweeps, open_production, stop

log = structlog.get_logger(__name__)

STATE_UNAVAILABLE_MESSAGE = "Service Unavailable: the state store did not answer, retry later"
GC_THRESHOLDS = (7_000, 20, 20)  # gc.set_threshold: allocations before a young collection, then the older ones


def production_app(title: str, routers: list[APIRouter], settings: Settings, *, publishes: bool) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.backends = await open_production(settings, publishes=publishes)
        relay = OutboxRelay.open(settings.redis_url, app.state.backends.log, settings) if publishes else None
        state = app.state.backends.state
        # What start-up made lives as long as the process: the collector never scans it again; and it runs 10x less
        # often than Python's default (700 allocations), which cost ~1 ms per ingested batch (15% of its CPU).
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        sweeps = None
        try:
            if settings.key_cache_ttl > 0:
                state.follow_key_changes(settings.key_cache_ttl)
            if relay is not None:
                relay.start()
                sweeps = claim_expiry_sweeps(app.state.backends)
            yield
        finally:
            await stop(sweeps)
            if relay is not None:
                await relay.close()
            await state.stop_following_key_changes()
            await app.state.backends.close()

    app = create_app(title, routers, lifespan, settings.max_body_bytes, settings.cors_origins)
    # Redis down, restarting or still loading its data (BusyLoadingError is a ConnectionError): the engine's
    # outage, not a fault of the service, as a 503 the client retries after Retry-After (API.md §0's error body).
    app.add_exception_handler(RedisConnectionError, _state_unavailable)
    app.add_exception_handler(RedisTimeoutError, _state_unavailable)
    return app


async def _state_unavailable(request: Request, exc: Exception) -> JSONResponse:
    return unavailable_answer(request, STATE_UNAVAILABLE_MESSAGE, "state store unavailable; answered 503", exc)


# The app factories uvicorn calls in every worker process (settings from the environment): `rewards ingest-api`, the
# ingest edge alone, publishing to Kafka; `rewards query-api`, the dashboards' reads alone, from ClickHouse (both keep
# keys and configurations in Redis).


def ingest_api() -> FastAPI:
    from ingest_api.app import ROUTERS

    return production_app("Rewards ingest API", ROUTERS, _process_settings(), publishes=True)


def query_api() -> FastAPI:
    from query_api.app import ROUTERS

    return production_app("Rewards query API", ROUTERS, _process_settings(), publishes=False)


def _process_settings() -> Settings:
    """The settings, with this process's logging configured by them: `--processes N` spawns N fresh interpreters,
    which the parent's configuration never reaches (their structlog printed every request, REWARDS_LOG_LEVEL or not)."""
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    return settings
