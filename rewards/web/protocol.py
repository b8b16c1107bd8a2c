"""The HTTP server's own answers, in the contract's error body (API.md §0).

A request the HTTP parser refuses never reaches the app, so uvicorn answers it itself, in plain text
(`Invalid HTTP request received.`). This protocol is uvicorn's httptools one with those answers in the contract's
body, and with a bound on the request line of its own, the gateway's (deploy/gateway.conf's
large_client_header_buffers): a longer one is 414 before the parser buffers more of it. Written here because uvicorn
offers no hook for either; it is a subclass of two small methods, checked by tests/web/test_hostile_surface.py."""

import asyncio

import httptools
import orjson
from prometheus_client import Counter
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from rewards.web.errors import error_body

MAX_REQUEST_LINE_BYTES = 64 * 1024
# After answering, what the client is still sending is read and dropped for a while before the connection closes (as
# nginx's lingering close): closing at once would reset it, and the client would lose the answer it has not read yet.
LINGER_S, LINGER_BYTES = 2.0, 4 * 1024 * 1024
REFUSED = Counter(
    "rewards_http_refused_by_parser_total", "Requests the HTTP parser refused before any app ran (414, 400)", ["status"]
)
TOO_LONG = f"request line must be at most {MAX_REQUEST_LINE_BYTES} bytes (send long lists in fewer requests)"


class ContractHttpProtocol(HttpToolsProtocol):
    url_too_long = False
    lingering: int | None = None  # bytes dropped since the answer, while lingering

    def data_received(self, data: bytes) -> None:
        if self.lingering is None:
            super().data_received(data)
            return
        self.lingering += len(data)
        if self.lingering > LINGER_BYTES:
            self.transport.close()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_REQUEST_LINE_BYTES:
            self.url_too_long = True
            raise httptools.HttpParserError(TOO_LONG)  # ends the parse: data_received answers send_400_response

    def send_400_response(self, msg: str) -> None:
        status, message = (414, TOO_LONG) if self.url_too_long else (400, "malformed HTTP request")
        REFUSED.labels(str(status)).inc()  # uvicorn has logged it (a warning: "Invalid HTTP request received.")
        body = orjson.dumps(error_body(status, message))
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [b"content-type: application/json\r\n", b"content-length: %d\r\n" % len(body), b"connection: close\r\n"]
        self.transport.write(b"".join([*head, b"\r\n", body]))
        self.lingering = 0
        if self.transport.can_write_eof():
            self.transport.write_eof()
        asyncio.get_running_loop().call_later(LINGER_S, self.transport.close)
