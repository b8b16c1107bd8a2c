"""An HTTP service of the production shape: its routers on the production adapters. One that publishes also
runs the outbox relay (rewards.production.outbox_relay), for the state changes its requests did not publish."""

import contextlib

from fastapi import APIRouter, FastAPI

from rewards.http import create_app
from rewards.production.backends import open_production
from rewards.production.outbox_relay import OutboxRelay
from rewards.settings import Settings


def production_app(title: str, routers: list[APIRouter], settings: Settings, *, publishes: bool) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.backends = await open_production(settings, publishes=publishes, reads_warehouse=True)
        relay = OutboxRelay.open(settings.redis_url, app.state.backends.log) if publishes else None
        try:
            if relay is not None:
                relay.start()
            yield
        finally:
            if relay is not None:
                await relay.close()
            await app.state.backends.close()

    return create_app(title, routers, lifespan, settings.max_body_bytes)
