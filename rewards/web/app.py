"""What every HTTP service is built from: the app factory (routers, middleware, error handlers, the OpenAPI
document, metrics), the health endpoint, and the routes outside the API's prefix."""

import structlog
from fastapi import APIRouter, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from prometheus_fastapi_instrumentator import Instrumentator

from rewards.web import landing
from rewards.web.answers import Health
from rewards.web.dependencies import StateDep, WarehouseDep
from rewards.web.errors import error_body
from rewards.web.handlers import install_error_handlers
from rewards.web.middleware import (
    BodyLimitMiddleware,
    JsonContentTypeMiddleware,
    RequestLogMiddleware,
    StateHeadersMiddleware,
    UnhandledErrorMiddleware,
    Utf8TargetMiddleware,
)
from rewards.web.openapi import DESCRIPTION, openapi_of, success

API_PREFIX = "/api/v1"


class PageRouter(APIRouter):
    """Routes served at the root, outside the API's prefix: pages for a browser (the operator console), not the API."""


log = structlog.get_logger(__name__)


def create_app(
    title: str, routers: list[APIRouter], lifespan, max_body_bytes: int, cors_origins: tuple[str, ...] = ()
) -> FastAPI:
    # /docs and /redoc with their scripts and styles served from the installed fastapi-offline package (under
    # /static-offline-docs): FastAPI's own pages load them from a CDN, blank on a machine offline.
    app = FastAPIOffline(
        title=title,
        version="1.0.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        openapi_url="/openapi.json",
        redirect_slashes=False,  # a 307 with an empty body helps no client: a 404 that names the path instead
    )
    for router in routers:
        app.include_router(router, prefix="" if isinstance(router, PageRouter) else API_PREFIX)
    app.include_router(landing.router)
    unhealthy = {503: {"description": "Service Unavailable: a storage engine does not answer"}}
    responses = {**success(Health, "The storage engines answer"), **unhealthy}
    app.add_api_route("/health", health, methods=["GET"], tags=["operations"], responses=responses)
    install_error_handlers(app)
    app.openapi = lambda: openapi_of(app)
    # The last added runs first: the request's log line (around all), unexpected errors, body size, a UTF-8 target,
    # Content-Type, rate-limit headers.
    app.add_middleware(StateHeadersMiddleware)
    app.add_middleware(JsonContentTypeMiddleware)
    app.add_middleware(Utf8TargetMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=max_body_bytes)
    app.add_middleware(UnhandledErrorMiddleware)
    if cors_origins:
        # A browser page of another origin (the published client in a project's site) asks first (OPTIONS) whether it
        # may send its Authorization header: Starlette's CORS middleware answers, before anything else runs.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "X-Fuul-Sdk-Version"],
            expose_headers=["Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining"],
            max_age=600,
        )
    app.add_middleware(RequestLogMiddleware)
    Instrumentator(excluded_handlers=["/metrics", "/health"]).instrument(app).expose(app, include_in_schema=False)
    return app


async def health(state: StateDep, warehouse: WarehouseDep) -> JSONResponse:
    try:
        await state.ping()
        if warehouse is not None:
            await warehouse.query("SELECT 1 AS ok")
    except Exception as exc:
        log.warning("health check failed", error=str(exc))
        return JSONResponse(error_body(503, "Unhealthy"), status_code=503)
    return JSONResponse({"status": "ok"})
