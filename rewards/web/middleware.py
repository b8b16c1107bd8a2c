"""Small ASGI middlewares: the contract's answers where Starlette's own would not give them.

The first limits request bodies. Starlette's RequestBodyLimitMiddleware (and FastAPI's `max_body_size`,
which wraps it) answers 413 in its own body, plain text or FastAPI's `{"detail"}`, not the contract's
error body, and only once the body is read; this one refuses by Content-Length before anything runs.

The second refuses bodies that are not JSON (415): without it any Content-Type would be parsed as JSON.

The third answers an unexpected exception with the contract's 500 and keeps the connection: Starlette's
ServerErrorMiddleware sends its 500 and then re-raises, and uvicorn then closes the keep-alive connection
(and logs the traceback a second time).

The last logs one line per request (uvicorn's access log is off)."""

import logging
import time
from urllib.parse import unquote_to_bytes

import orjson
import structlog
from prometheus_client import Counter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rewards.web.errors import error_body

log = structlog.get_logger(__name__)

UNHANDLED_ERRORS = Counter("rewards_http_unhandled_errors_total", "Requests answered 500 by an unexpected exception")


async def send_error(send: Send, status: int, message: str | list[str]) -> None:
    body = orjson.dumps(error_body(status, message))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass


class _TrackedSend:
    """`send`, noting whether the response has started (after which no error answer can be sent)."""

    def __init__(self, send: Send):
        self._send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        self.started = self.started or message["type"] == "http.response.start"
        await self._send(message)


class BodyLimitMiddleware:
    """Refuse bodies over `max_body_bytes` with 413, by Content-Length or while streaming."""

    def __init__(self, app: ASGIApp, max_body_bytes: int):
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            return await self._refuse(send)
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_body_bytes:
                raise _TooLarge
            return message

        response = _TrackedSend(send)
        try:
            await self.app(scope, limited_receive, response)
        except _TooLarge:
            if not response.started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        await send_error(send, 413, body_too_large(self.max_body_bytes))


def body_too_large(max_body_bytes: int) -> str:
    return f"Request body must not be larger than {max_body_bytes} bytes"


def is_json_media_type(content_type: bytes) -> bool:
    """`application/json` or `application/<anything>+json`, any parameters (`; charset=utf-8`), any case."""
    media = content_type.partition(b";")[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


class JsonContentTypeMiddleware:
    """Refuse a non-empty request body that is not declared JSON with 415 (API.md §0: bodies are JSON).

    A request without a body passes whatever its Content-Type (or none): POST /referral_codes takes its
    fields from the query string then, as the published client sends them. Whether there is a body is
    told by Content-Length; a chunked body is peeked at until its first byte (or its end)."""

    METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
    MESSAGE = "Content-Type must be application/json"

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in self.METHODS:
            return await self.app(scope, receive, send)
        content_type = length = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"content-type":
                content_type = value
            elif name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = True
        if content_type is not None and is_json_media_type(content_type):
            return await self.app(scope, receive, send)
        if not chunked:
            if length is None or length.strip() == b"0":
                return await self.app(scope, receive, send)
            return await send_error(send, 415, self.MESSAGE)
        first = await receive()
        while first["type"] == "http.request" and not first.get("body") and first.get("more_body", False):
            first = await receive()
        if first["type"] == "http.request" and first.get("body"):
            return await send_error(send, 415, self.MESSAGE)
        replayed = False

        async def replaying_receive() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return first
            return await receive()

        await self.app(scope, replaying_receive, send)


class UnhandledErrorMiddleware:
    """An unexpected exception: logged once, counted, answered 500 with the contract's body, and the
    connection kept. Once the response has started no 500 can be sent: the exception goes on, uvicorn
    logs it and closes the connection (the only way left to tell the client the response is broken)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        response = _TrackedSend(send)
        try:
            await self.app(scope, receive, response)
        except Exception:
            UNHANDLED_ERRORS.inc()
            if response.started:
                raise  # uvicorn logs it (once) and closes the connection
            log.exception("unhandled error", method=scope["method"], path=logged_path(scope))
            await send_error(send, 500, "Internal Server Error")


class Utf8TargetMiddleware:
    """Refuse a path or query string that is not UTF-8 once percent-decoded (400). Starlette decodes them with
    `errors="replace"`, so `a%FF@example.com` would silently become another user, `a\ufffd@example.com`."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not _utf8_target(scope):
            return await send_error(send, 400, "the path and query string must be UTF-8 once percent-decoded")
        await self.app(scope, receive, send)


def _utf8_target(scope: Scope) -> bool:
    try:
        unquote_to_bytes(scope.get("raw_path") or b"").decode()
        unquote_to_bytes(scope.get("query_string", b"").replace(b"+", b" ")).decode()
    except UnicodeDecodeError:
        return False
    return True


class StateHeadersMiddleware:
    """Add the headers a request's handlers left in `scope["state"]["extra_headers"]` (rate limits)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = scope.get("state", {}).get("extra_headers") or {}
                present = {name.lower() for name, _ in message.get("headers", [])}
                added = [
                    (k.lower().encode(), v.encode()) for k, v in extra.items() if k.lower().encode() not in present
                ]
                message = {**message, "headers": [*message.get("headers", []), *added]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def logged_path(scope: Scope) -> str:
    """The path with each path parameter's value replaced by its name (`/api/v1/payouts/totals/{user_identifier}`): a
    path may carry a user's identifier, which no log may hold (API.md §11, erasure). (From the parameters the router
    found rather than its route's template: the template of a route included under a prefix lacks the prefix.)"""
    path = scope["path"]
    for name, value in (scope.get("path_params") or {}).items():
        if (text := str(value)) and (at := path.rfind(text)) >= 0:
            path = f"{path[:at]}{{{name}}}{path[at + len(text) :]}"
    return path


# Requests whose line would drown the others (probes and scrapes, several a second): logged at debug.
QUIET_PATHS = frozenset({"/health", "/metrics"})


class RequestLogMiddleware:
    """One log line per request once it is answered: method, path, status, milliseconds and, once the key is
    resolved, its project (`scope["state"]["project_id"]`, set by rewards.web.auth.guard). Never a header: the key
    stays out of the logs. Outermost, so it sees every answer, the 500s of UnhandledErrorMiddleware included.
    (uvicorn's own access log is off: it has neither the project nor the time.)"""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.perf_counter(), 500  # 500: an error escaped before any answer

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_noting_status)
        finally:
            level = logging.DEBUG if scope["path"] in QUIET_PATHS else logging.INFO
            log.log(
                level, "request", method=scope["method"], path=logged_path(scope), status=status,
                ms=round((time.perf_counter() - started) * 1000, 1), project=scope.get("state", {}).get("project_id"),
            )  # fmt: skip
