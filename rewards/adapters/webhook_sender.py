"""Calls to a project's webhook URLs (API.md §10), an SSRF risk handled here: each connection goes only to an address
rewards.domain.webhooks.address_allowed accepts, checked when connecting (the host resolved then, and the connection
made to the very address checked: a DNS answer rebound between the check and the connect cannot redirect it); no
redirect is followed; every call is bounded in time and in the bytes of the answer read.

Written on httpx with a network backend of our own (httpcore's is the one place a connection's address is chosen;
no library offers an address check at connection time for an async client). TLS still verifies the URL's host name
(httpcore passes it as the server name)."""

import asyncio
import socket
import ssl
import time
from datetime import UTC, datetime

import anyio
import certifi
import httpcore
import httpx
from standardwebhooks import Webhook

from rewards.domain.webhooks import Attempt, address_allowed, refusal

TIMEOUT_S = 10.0  # API.md §10: a 2xx within 10 s is success
MAX_ANSWER_BYTES = 4096  # of a receiver's answer, kept in the delivery log
USER_AGENT = "rewards-webhooks/1"
MAX_CONNECTIONS = 512


class RefusedAddress(httpcore.ConnectError):
    """The URL's host resolves to no address a webhook may reach."""


class _CheckedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, allow_private: bool):
        self._allow_private = allow_private
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
        allowed = [address for address in addresses if address_allowed(address, self._allow_private)]
        if not allowed:
            raise RefusedAddress(f"{host} resolves to {refusal(addresses[0])}" if addresses else f"{host}: no address")
        return await self._inner.connect_tcp(
            allowed[0], port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise RefusedAddress("a webhook never goes to a unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, allow_private: bool):
        super().__init__(trust_env=False)  # no proxy from the environment: its address would go unchecked
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl.create_default_context(cafile=certifi.where()),
            # The dispatcher has at most 512 attempts in flight (4 per endpoint): keep their connections (a TLS
            # handshake per delivery would cost more than the delivery).
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_CONNECTIONS,
            network_backend=_CheckedBackend(allow_private),
        )


def client(allow_private: bool) -> httpx.AsyncClient:
    """A client for webhook calls: guarded connections, no redirects, no cookies kept, bounded time."""
    return httpx.AsyncClient(
        transport=_GuardedTransport(allow_private), follow_redirects=False, timeout=TIMEOUT_S, trust_env=False
    )


class GuardedSender:
    """rewards.ports.WebhookSender: every call through one client per event loop, its connections kept (a client made
    per call cost ~41 ms of CPU, its TLS roots loaded twice: bench/webhooks.py). A kept connection stays with the
    address checked when it was made; each new one is checked again."""

    def __init__(self, allow_private: bool):
        self._allow_private = allow_private
        self._clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}

    async def send(self, url: str, secret: str, webhook_id: str, body: bytes) -> Attempt:
        return await send(self._client(), url, secret, webhook_id, body)

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if (http := self._clients.get(loop)) is None:
            for done in [other for other in self._clients if other.is_closed()]:
                del self._clients[done]
            http = self._clients[loop] = client(self._allow_private)
        return http

    async def close(self) -> None:
        http = self._clients.pop(asyncio.get_running_loop(), None)
        if http is not None:
            await http.aclose()


def signed_headers(secret: str, webhook_id: str, body: bytes, at: datetime | None = None) -> dict[str, str]:
    """The Standard Webhooks headers of a message (its signature by the `standardwebhooks` package)."""
    at = at or datetime.now(UTC)
    signature = Webhook(secret).sign(webhook_id, at, body.decode())
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
        "user-agent": USER_AGENT,
    }


async def send(http: httpx.AsyncClient, url: str, secret: str, webhook_id: str, body: bytes) -> Attempt:
    """POST one message; what came of it (never raises for the receiver's doing)."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(TIMEOUT_S + 1):  # the whole call, however the receiver trickles its answer
            answer = await _post(http, url, signed_headers(secret, webhook_id, body), body)
    except (TimeoutError, httpx.TimeoutException):
        return _failed(webhook_id, f"no answer within {TIMEOUT_S:g} s", started)
    except httpx.HTTPError as exc:
        if isinstance(exc.__cause__ or exc.__context__, RefusedAddress):  # (httpx wraps httpcore's errors)
            return _failed(webhook_id, f"refused: {exc}", started)
        return _failed(webhook_id, f"{type(exc).__name__}: {exc}"[:500], started)
    status, text = answer
    ok = 200 <= status < 300
    error = None if ok else f"answered {status}"
    return Attempt(webhook_id, status, ok, error, text, _ms_since(started))


async def _post(http: httpx.AsyncClient, url: str, headers: dict, body: bytes) -> tuple[int, str]:
    async with http.stream("POST", url, content=body, headers=headers) as response:
        read = bytearray()
        async for chunk in response.aiter_raw():
            read += chunk[: MAX_ANSWER_BYTES - len(read)]
            if len(read) >= MAX_ANSWER_BYTES:
                break
        return response.status_code, read.decode(errors="replace")


def _failed(webhook_id: str, error: str, started: float) -> Attempt:
    return Attempt(webhook_id, None, False, error, "", _ms_since(started))


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
