"""An HTTP service of the production shape: its routers on the production adapters."""

import contextlib

from fastapi import APIRouter, FastAPI

from rewards.http import create_app
from rewards.production.backends import open_production
from rewards.settings import Settings


def production_app(title: str, routers: list[APIRouter], settings: Settings, *, publishes: bool) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.backends = await open_production(settings, publishes=publishes, reads_warehouse=True)
        try:
            yield
        finally:
            await app.state.backends.close()

    return create_app(title, routers, lifespan, settings.max_body_bytes)
