"""Calls to a project's webhook URLs (API.md §10), an SSRF risk handled here: each connection goes only to an address
rewards.domain.webhooks.address_allowed accepts, checked when connecting (on the very address the socket is made for:
a DNS answer rebound between a check and the connect cannot redirect it, and a literal address is checked alike); no
redirect is followed; every call is bounded in time and in the bytes of the answer read.

Written on aiohttp (already the workers' dependency through faust): its connector's `socket_factory` is handed each
address it is about to connect to, where the check lives. TLS verifies the URL's host name against certifi's roots.
(httpx with a network backend of ours did the same at ~1.4 ms of CPU a request against aiohttp's ~0.1: its connection
pool scans every connection for each request; bench/webhooks.py.)"""

import asyncio
import functools
import socket
import ssl
import time
from collections import OrderedDict
from datetime import UTC, datetime
from urllib.parse import urlsplit

import aiohttp
import certifi
from standardwebhooks import Webhook

from rewards.domain.webhooks import Attempt, address_allowed, refusal

TIMEOUT_S = 10.0  # API.md §10: a 2xx within 10 s is success
MAX_ANSWER_BYTES = 4096  # of a receiver's answer, kept in the delivery log
USER_AGENT = "rewards-webhooks/1"
ORIGIN_CONNECTIONS = 16  # kept per receiving origin (a project may have several endpoints on one host, 4 attempts each)
MAX_ORIGINS = 1_000  # sessions kept per process, the most recently used


class RefusedAddress(OSError):
    """An address a webhook may not reach (an OSError: the connector tries the host's next address, if any)."""


def _checked_socket(allow_private: bool):
    """The connector's socket factory: the address about to be connected to, checked."""

    def make(addr_info) -> socket.socket:
        family, kind, proto, _, address = addr_info
        if not address_allowed(str(address[0]), allow_private):
            raise RefusedAddress(f"connecting to {refusal(str(address[0]))}")
        return socket.socket(family=family, type=kind, proto=proto)

    return make


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """certifi's roots, loaded once (~17 ms of CPU each time)."""
    return ssl.create_default_context(cafile=certifi.where())


def client(allow_private: bool, connections: int = ORIGIN_CONNECTIONS) -> aiohttp.ClientSession:
    """A session for webhook calls: guarded connections, no proxy from the environment (its address would go
    unchecked), no cookies kept."""
    connector = aiohttp.TCPConnector(
        limit=connections, ssl=_ssl_context(), socket_factory=_checked_socket(allow_private), ttl_dns_cache=10
    )
    return aiohttp.ClientSession(
        connector=connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False
    )


class GuardedSender:
    """rewards.ports.WebhookSender: a session per receiving origin (scheme, host, port) and event loop, its connections
    kept, the most recently used MAX_ORIGINS of them (the oldest closed). A kept connection stays with the address
    checked when it was made; each new one is checked again."""

    def __init__(self, allow_private: bool):
        self._allow_private = allow_private
        self._sessions: OrderedDict[tuple, aiohttp.ClientSession] = OrderedDict()
        self._closing: set[asyncio.Task] = set()

    async def send(self, url: str, secret: str, webhook_id: str, body: bytes) -> Attempt:
        return await send(self._session(url), url, secret, webhook_id, body)

    def _session(self, url: str) -> aiohttp.ClientSession:
        parts = urlsplit(url)
        key = (asyncio.get_running_loop(), parts.scheme, parts.hostname, parts.port)
        if (session := self._sessions.get(key)) is not None:
            self._sessions.move_to_end(key)
            return session
        session = self._sessions[key] = client(self._allow_private)
        while len(self._sessions) > MAX_ORIGINS:
            _, oldest = self._sessions.popitem(last=False)
            closing = asyncio.create_task(oldest.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        return session

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        mine = [key for key in self._sessions if key[0] is loop]
        await asyncio.gather(*(self._sessions.pop(key).close() for key in mine), *self._closing)


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


async def send(session: aiohttp.ClientSession, url: str, secret: str, webhook_id: str, body: bytes) -> Attempt:
    """POST one message; what came of it (never raises for the receiver's doing)."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(TIMEOUT_S):  # the whole call, however the receiver trickles its answer
            status, text = await _post(session, url, signed_headers(secret, webhook_id, body), body)
    except TimeoutError:
        return _failed(webhook_id, f"no answer within {TIMEOUT_S:g} s", started)
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, RefusedAddress):
            return _failed(webhook_id, f"refused: {exc.host} ({exc.os_error})", started)
        return _failed(webhook_id, f"cannot connect to {exc.host}:{exc.port}: {exc.os_error}"[:500], started)
    except (aiohttp.ClientError, OSError, ValueError) as exc:  # ValueError: a URL aiohttp cannot use
        return _failed(webhook_id, f"{type(exc).__name__}: {exc}"[:500], started)
    ok = 200 <= status < 300
    return Attempt(webhook_id, status, ok, None if ok else f"answered {status}", text, _ms_since(started))


async def _post(session: aiohttp.ClientSession, url: str, headers: dict, body: bytes) -> tuple[int, str]:
    async with session.post(url, data=body, headers=headers, allow_redirects=False) as response:
        read = bytearray()
        while len(read) < MAX_ANSWER_BYTES and (chunk := await response.content.read(MAX_ANSWER_BYTES - len(read))):
            read += chunk
        return response.status, read.decode(errors="replace")


def _failed(webhook_id: str, error: str, started: float) -> Attempt:
    return Attempt(webhook_id, None, False, error, "", _ms_since(started))


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
