"""What every HTTP service shares: the app factory, the contract's errors, auth, limits, common params."""

import copy
from collections.abc import Callable

import orjson
import structlog
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline
from prometheus_fastapi_instrumentator import Instrumentator
from pydantic import AliasChoices, BaseModel, ValidationError
from starlette.convertors import StringConvertor, register_url_convertor
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from rewards.domain.errors import DomainError, ErrorKind
from rewards.domain.identifiers import InvalidIdentifier, canonical_identifier
from rewards.domain.keys import SCOPES
from rewards.domain.payouts import User
from rewards.ports import Principal, Unavailable
from rewards.web.backends import Backends
from rewards.web.errors import RETRY_AFTER_S, ApiError, ErrorBody, bad_request, error_body, validation_messages
from rewards.web.middleware import (
    BodyLimitMiddleware,
    JsonContentTypeMiddleware,
    RequestLogMiddleware,
    StateHeadersMiddleware,
    UnhandledErrorMiddleware,
    Utf8TargetMiddleware,
)
from rewards.web.ratelimit import DEFAULT_LIMITS, RateLimited

try:
    from fastapi.routing import iter_route_contexts
except ImportError:  # FastAPI before 0.165: app.routes holds the APIRoutes themselves

    def iter_route_contexts(routes):
        return iter(routes)


API_PREFIX = "/api/v1"


class PageRouter(APIRouter):
    """Routes served at the root, outside the API's prefix: pages for a browser (the operator console), not the API."""


class AnyText(StringConvertor):
    """A path parameter that may hold `/` and any character. Starlette's `path` convertor is `.*`, which stops
    before a newline, and its route patterns end in `$`, which matches before a final one: `0x…%0A` would
    then be read as `0x…`, another identifier."""

    regex = r"[\s\S]+"


register_url_convertor("any_text", AnyText())
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
    unhealthy = {503: {"description": "Service Unavailable: a storage engine does not answer"}}
    app.add_api_route("/health", health, methods=["GET"], tags=["operations"], responses=unhealthy)
    _install_error_handlers(app)
    app.openapi = lambda: _openapi(app)
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


def unavailable_answer(request: Request, message: str, log_line: str | None, error: Exception) -> JSONResponse:
    """503 with Retry-After: nothing was changed, the same request may be sent again."""
    if log_line is not None:
        log.warning(log_line, method=request.method, path=request.url.path, error=str(error))
    headers = {"Retry-After": str(RETRY_AFTER_S)}
    return JSONResponse(error_body(503, message), status_code=503, headers=headers)


# The one place a broken domain rule becomes an HTTP status.
DOMAIN_ERROR_STATUS = {
    ErrorKind.INVALID: 400,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.CONFLICT: 409,
    ErrorKind.EXHAUSTED: 422,
}


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return JSONResponse(error_body(exc.status, exc.message), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(Unavailable)
    async def refused_for_now(request: Request, exc: Unavailable):
        # Every endpoint that publishes does it inside its state-store block, which the exception undid
        # on its way here (rewards.ports): nothing changed, and the same request may be sent again.
        return unavailable_answer(request, exc.answer, exc.log_line, exc)

    @app.exception_handler(DomainError)
    async def domain_error(request: Request, exc: DomainError):
        status = DOMAIN_ERROR_STATUS[exc.kind]
        return JSONResponse(error_body(status, str(exc)), status_code=status)

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
        if exc.status_code == 404 and (without := _without_trailing_slash(request)):
            message = f"Not Found: no path ends in '/'; did you mean {without}?"
        headers = exc.headers
        if exc.status_code == 405:  # Starlette names the methods of the first route of the path only
            headers = {**(headers or {}), "Allow": ", ".join(_allowed_methods(request))}
        return JSONResponse(error_body(exc.status_code, message), status_code=exc.status_code, headers=headers)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception):
        # Only what escapes UnhandledErrorMiddleware gets here (an error outside it, or after the response
        # started): Starlette re-raises after this answer, and uvicorn logs it and closes the connection.
        return JSONResponse(error_body(500, "Internal Server Error"), status_code=500)


# The OpenAPI document: what every operation answers besides its success, derived from the routes
# (their guard, their method, their own `responses=`), and the contract's error body for each of them.

BEARER = "bearerAuth"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
DESCRIPTION = (
    "The HTTP contract is API.md. Every request carries `Authorization: Bearer <API_KEY>`; bodies are JSON "
    "(`Content-Type: application/json`). Every 4xx/5xx answers the error body `ErrorBody`; invalid "
    "parameters or bodies answer 400, never 422 (422 means only an unavailable referral code)."
)
PROJECT_DELETED = "Project not found: the key's project has been deleted"
# For the `responses=` of operations that publish to the event log.
LOG_UNAVAILABLE = {503: {"description": "Service Unavailable: the event log did not take the write; nothing changed"}}
RETRY_AFTER = {"description": "Seconds to wait before retrying", "schema": {"type": "integer"}}
RATE_HEADERS = {
    name: {"description": description, "schema": {"type": "integer"}}
    for name, description in (
        ("X-RateLimit-Limit", "Calls this key may make to this operation in a sliding minute"),
        ("X-RateLimit-Remaining", "Calls left in the current window"),
    )
}


def request_body_doc(model: type[BaseModel], *, required: bool = True, query: bool = False) -> dict:
    """`openapi_extra` for a JSON body the handler reads and validates with `model` itself (FastAPI cannot
    see it). `query`: the same fields are read from the query string when the request has no body."""
    schema = model.model_json_schema()
    extra: dict = {"requestBody": {"required": required, "content": {"application/json": {"schema": schema}}}}
    if query:
        extra["parameters"] = [
            {"name": name, "in": "query", "required": False, "schema": _without_null(field),
             "description": "Read only when the request has no body"}
            for name, field in schema["properties"].items()
        ]  # fmt: skip
    return extra


def _without_null(schema: dict) -> dict:
    """A query parameter is never JSON null: `X | None` is documented as X."""
    options = [option for option in schema.get("anyOf", ()) if option != {"type": "null"}]
    rest = {key: value for key, value in schema.items() if key != "anyOf" and (key, value) != ("default", None)}
    if not options:
        return rest
    return {**rest, **options[0]} if len(options) == 1 else {**rest, "anyOf": options}


def _openapi(app: FastAPI) -> dict:
    if app.openapi_schema is None:
        app.openapi_schema = _document(app)
    return app.openapi_schema


def _document(app: FastAPI) -> dict:
    doc = copy.deepcopy(  # parts of it may be the routes' own `openapi_extra`, shared by every app
        get_openapi(
            title=app.title,
            version=app.version,
            openapi_version=app.openapi_version,
            description=app.description,
            routes=app.routes,
            tags=app.openapi_tags,
            servers=app.servers,
            separate_input_output_schemas=app.separate_input_output_schemas,
        )
    )
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["ErrorBody"] = ErrorBody.model_json_schema()
    components["securitySchemes"] = {
        BEARER: {"type": "http", "scheme": "bearer", "description": "An API key (`rewards key create`)"}
    }
    for route in iter_route_contexts(app.routes):  # each route as included (prefix, router's responses)
        if isinstance(getattr(route, "original_route", route), APIRoute) and route.include_in_schema:
            for method in route.methods:
                _document_operation(doc["paths"][route.path_format][method.lower()], route, method, schemas)
    doc = _local_refs_to_components(doc)
    for name in ("HTTPValidationError", "ValidationError"):  # FastAPI's 422 body: every error is ErrorBody
        doc["components"]["schemas"].pop(name, None)
    return doc


def _document_operation(operation: dict, route, method: str, schemas: dict) -> None:
    declared = {int(status) for status in route.responses if str(status).isdigit()}
    responses: dict = operation["responses"]
    if 422 not in declared:
        responses.pop("422", None)
    _hoist_defs(operation, schemas)
    errors: dict[int, str] = {}
    if operation.get("parameters") or "requestBody" in operation:
        errors[400] = "Bad Request: a parameter or the body is invalid (`message` lists every problem)"
    if operation.get("parameters"):
        errors[414] = "URI Too Long: the request line (path and query string) is over 64 KiB"
    guarded = _guard_of(route.dependant)
    if guarded is not None:
        scope, limited = guarded
        operation["security"] = [{BEARER: []}]
        errors[401] = "Unauthorized: no bearer key, a malformed Authorization header, an unknown or revoked key"
        if scope is not None:
            errors[403] = (
                "Forbidden: the key lacks the service_role scope"
                if scope == "service_role"
                else f"Forbidden: the key has neither the {scope} scope nor service_role"
            )
        errors[404] = PROJECT_DELETED
        if limited is not None:
            errors[429] = (
                f"Too Many Requests: over this key's limit for the operation ({DEFAULT_LIMITS[limited]} unless "
                "the operator set another); retry after Retry-After seconds"
            )
            for status, response in responses.items():
                if status.startswith("2"):
                    response["headers"] = {name: {**header, "required": True} for name, header in RATE_HEADERS.items()}
    if method in BODY_METHODS:
        errors[413] = "Payload Too Large: the body is over the service's size limit"
        errors[415] = "Unsupported Media Type: a body whose Content-Type is not application/json"
    for status, description in errors.items():
        own = responses.get(str(status))
        responses[str(status)] = {"description": f"{own['description']}; or {description}" if own else description}
    for status, response in responses.items():
        if int(status) >= 400:
            response["content"] = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        if status == "429":
            response["headers"] = {"Retry-After": {**RETRY_AFTER, "required": True}, **RATE_HEADERS}
        elif status == "503" and guarded is not None:
            response["headers"] = {"Retry-After": RETRY_AFTER}
    operation["responses"] = dict(sorted(responses.items()))


def _guard_of(dependant: Dependant) -> tuple[str | None, str | None] | None:
    for dependency in dependant.dependencies:
        found = getattr(dependency.call, "guarded", None) or _guard_of(dependency)
        if found is not None:
            return found
    return None


def _hoist_defs(operation: dict, schemas: dict) -> None:
    """A body schema from `model_json_schema()` keeps its models in `$defs`, whose `#/$defs/...` refs would
    point at the document's root: they move to the document's components."""
    for media in operation.get("requestBody", {}).get("content", {}).values():
        for name, schema in media.get("schema", {}).pop("$defs", {}).items():
            if schemas.setdefault(name, schema) != schema:
                raise ValueError(f"two different schemas named {name} in the OpenAPI document")


def _local_refs_to_components(node):
    if isinstance(node, dict):
        return {
            key: "#/components/schemas/" + value.removeprefix("#/$defs/")
            if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/")
            else _local_refs_to_components(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_local_refs_to_components(item) for item in node]
    return node


def _allowed_methods(request: Request) -> list[str]:
    """The methods of every route with the path template of the first route matching the path (as the
    document lists them: GET and POST /affiliates are routes of two routers)."""
    routes = list(iter_route_contexts(request.app.routes))
    template = next((r.path_format for r in routes if r.matches(request.scope)[0] != Match.NONE), None)
    return sorted({m for r in routes if r.path_format == template for m in getattr(r, "methods", None) or ()})


def _without_trailing_slash(request: Request) -> str | None:
    """The request's path without its trailing slash, if a route has that path."""
    path = request.url.path
    if len(path) < 2 or not path.endswith("/"):
        return None
    scope = {**request.scope, "path": path.rstrip("/")}
    found = any(r.matches(scope)[0] != Match.NONE for r in iter_route_contexts(request.app.routes))
    return scope["path"] if found else None


def guard(scope: str | None, operation: str | None = None) -> Callable:
    """Authenticate the bearer key, check its scope, then count the call against the key's limit."""
    if scope is not None and scope not in SCOPES:
        raise ValueError(f"unknown scope {scope}")

    async def dependency(request: Request) -> Principal:
        principal = await _authenticate(request)
        request.scope.setdefault("state", {})["project_id"] = principal.project_id  # for the request's log line
        if scope is not None and "service_role" not in principal.scopes and scope not in principal.scopes:
            raise ApiError(403, f"This operation requires the {scope} scope")
        if operation is not None:
            backends = backends_of(request)
            headers = await backends.limiter.hit(operation, principal.key_id)
            request.scope.setdefault("state", {})["extra_headers"] = headers
        return principal

    dependency.guarded = (scope, operation)  # read by the OpenAPI document: 401, 403, 429, bearer auth
    return dependency


MISSING_KEY = "Missing Authorization header: send 'Authorization: Bearer <API key>'"
NOT_BEARER = "The Authorization header must be 'Bearer <API key>'"
UNKNOWN_KEY = "Unknown or revoked API key"


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, message, headers={"WWW-Authenticate": "Bearer"})


async def _authenticate(request: Request) -> Principal:
    """The key's principal, or a 401 that says which of the three things is wrong (never echoing the key)."""
    header = request.headers.get("authorization", "").strip()
    if not header:
        raise _unauthorized(MISSING_KEY)
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _unauthorized(NOT_BEARER)
    principal = await backends_of(request).state.resolve_key(token.strip())
    if principal is None:
        raise _unauthorized(UNKNOWN_KEY)
    if principal.project_deleted:
        raise ApiError(404, "Project not found")
    return principal


async def request_fields(request: Request, model: type[BaseModel], *, query: bool = True) -> BaseModel:
    """The request's fields, validated by `model`, or a 400 naming every problem: its JSON body's, over those of the
    query string when `query` (API.md §7: the published client sends a user in the query string and the rest in the
    body; either alone works too). Query parameters the model does not name are ignored (§0)."""
    body = await request.body()
    raw = json_body(body) if body.strip() else {}
    if not isinstance(raw, dict):
        raise bad_request("body must be a JSON object")
    if query:
        names = _input_names(model)
        raw = {**{k: v for k, v in request.query_params.items() if k in names}, **raw}
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise bad_request(validation_messages(exc)) from exc


def _input_names(model: type[BaseModel]) -> set[str]:
    """Every name a field of `model` is read under: its own, and its validation aliases."""
    names = set()
    for name, info in model.model_fields.items():
        names.add(name)
        alias = info.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        names.update(choice for choice in choices if isinstance(choice, str))
    return names


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


# Pages past this are refused rather than read: any offset they make stays far inside every engine's
# integers (SQLite's and ClickHouse's 64 bits; 2^60 × 16 would wrap to 0), and no listing is that long.
MAX_PAGE = 2**31 - 1


class Page:
    """`page` 1–MAX_PAGE and `page_size` 1–100 (API.md §0)."""

    def __init__(self, page: int = Query(1, ge=1, le=MAX_PAGE), page_size: int = Query(25, ge=1, le=100)):
        self.page = page
        self.size = page_size

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.size

    def next_page(self, total: int) -> int | None:
        return self.page + 1 if self.page * self.size < total else None


PageParams = Depends(Page)
