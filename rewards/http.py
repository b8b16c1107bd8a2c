"""What every HTTP service shares: the app factory, the contract's errors, auth, limits, common params."""

from collections.abc import Callable

import orjson
import structlog
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_fastapi_instrumentator import Instrumentator
from starlette.exceptions import HTTPException as StarletteHTTPException

from rewards.backends import Backends
from rewards.domain.errors import DomainError
from rewards.domain.identifiers import InvalidIdentifier, canonical_identifier
from rewards.domain.payouts import User
from rewards.errors import ApiError, bad_request, error_body, validation_messages
from rewards.keys import SCOPES
from rewards.middleware import BodyLimitMiddleware, StateHeadersMiddleware
from rewards.ports import Principal
from rewards.ratelimit import RateLimited

API_PREFIX = "/api/v1"
log = structlog.get_logger(__name__)


def create_app(title: str, routers: list[APIRouter], lifespan, max_body_bytes: int) -> FastAPI:
    app = FastAPI(title=title, version="1.0.0", lifespan=lifespan, docs_url="/docs", openapi_url="/openapi.json")
    for router in routers:
        app.include_router(router, prefix=API_PREFIX)
    app.add_api_route("/health", health, methods=["GET"], tags=["operations"])
    _install_error_handlers(app)
    app.add_middleware(StateHeadersMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=max_body_bytes)
    Instrumentator(excluded_handlers=["/metrics", "/health"]).instrument(app).expose(app, include_in_schema=False)
    return app


async def health(request: Request) -> JSONResponse:
    backends: Backends = request.app.state.backends
    try:
        await backends.state.ping()
        if backends.warehouse is not None:
            await backends.warehouse.query("SELECT 1 AS ok")
    except Exception as exc:
        log.warning("health check failed", error=str(exc))
        return JSONResponse(error_body(503, "Unhealthy"), status_code=503)
    return JSONResponse({"status": "ok"})


def backends_of(request: Request) -> Backends:
    return request.app.state.backends


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return JSONResponse(error_body(exc.status, exc.message), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(DomainError)
    async def domain_error(request: Request, exc: DomainError):
        return JSONResponse(error_body(exc.status, str(exc)), status_code=exc.status)

    @app.exception_handler(RateLimited)
    async def rate_limited(request: Request, exc: RateLimited):
        return JSONResponse(error_body(429, "Too Many Requests"), status_code=429, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError):
        errors = [{**error, "loc": tuple(error["loc"][1:])} for error in exc.errors()]
        messages = validation_messages(errors)
        return JSONResponse(error_body(400, messages[0] if len(messages) == 1 else messages), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else "Error"
        return JSONResponse(error_body(exc.status_code, message), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception):
        log.exception("unhandled error", path=request.url.path)
        return JSONResponse(error_body(500, "Internal Server Error"), status_code=500)


def guard(scope: str | None, operation: str | None = None) -> Callable:
    """Authenticate the bearer key, check its scope, then count the call against the key's limit."""
    if scope is not None and scope not in SCOPES:
        raise ValueError(f"unknown scope {scope}")

    async def dependency(request: Request) -> Principal:
        principal = await _authenticate(request)
        if scope is not None and "service_role" not in principal.scopes and scope not in principal.scopes:
            raise ApiError(403, f"This operation requires the {scope} scope")
        if operation is not None:
            backends = backends_of(request)
            headers = await backends.limiter.hit(operation, principal.key_id)
            request.scope.setdefault("state", {})["extra_headers"] = headers
        return principal

    return dependency


async def _authenticate(request: Request) -> Principal:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "Unauthorized")
    principal = await backends_of(request).state.resolve_key(token.strip())
    if principal is None:
        raise ApiError(401, "Unauthorized")
    if principal.project_deleted:
        raise ApiError(404, "Project not found")
    return principal


def json_body(body: bytes) -> object:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise bad_request("body must be valid JSON") from exc


def parse_user(identifier: str | None, identifier_type: str | None, field: str = "user_identifier") -> User:
    missing = [name for name, value in ((field, identifier), (f"{field}_type", identifier_type)) if not value]
    if missing:
        raise bad_request([f"{name} is required" for name in missing])
    try:
        return User(canonical_identifier(identifier, identifier_type), identifier_type)
    except InvalidIdentifier as exc:
        raise bad_request(str(exc)) from exc


class Page:
    """`page` ≥ 1 and `page_size` 1–100 (API.md §0)."""

    def __init__(self, page: int = Query(1, ge=1), page_size: int = Query(25, ge=1, le=100)):
        self.page = page
        self.size = page_size

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.size

    def next_page(self, total: int) -> int | None:
        return self.page + 1 if self.page * self.size < total else None


PageParams = Depends(Page)
