"""The one place errors become answers: every exception a request can end in, as the contract's error body
(API.md §0) with its status and headers."""

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from rewards.domain.errors import DomainError, ErrorKind
from rewards.ports import Unavailable
from rewards.web.errors import RETRY_AFTER_S, ApiError, error_body, validation_messages
from rewards.web.ratelimit import RateLimited

try:
    from fastapi.routing import iter_route_contexts
except ImportError:  # FastAPI before 0.165: app.routes holds the APIRoutes themselves

    def iter_route_contexts(routes):
        return iter(routes)


log = structlog.get_logger(__name__)


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
    ErrorKind.REFUSED: 403,
}


def install_error_handlers(app: FastAPI) -> None:
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
