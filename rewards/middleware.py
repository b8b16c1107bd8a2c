"""Two small ASGI middlewares.

The first limits request bodies. Starlette's RequestBodyLimitMiddleware (and FastAPI's `max_body_size`,
which wraps it) answers 413 in its own body, plain text or FastAPI's `{"detail"}`, not the contract's
error body, and only once the body is read; this one refuses by Content-Length before anything runs."""

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rewards.errors import error_body


class _TooLarge(Exception):
    pass


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
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_body_bytes:
                raise _TooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = orjson.dumps(error_body(413, f"Request body must not be larger than {self.max_body_bytes} bytes"))
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


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
