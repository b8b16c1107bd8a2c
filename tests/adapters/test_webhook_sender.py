"""rewards/adapters/webhook_sender.py against real local HTTP receivers: Standard Webhooks signatures the
`standardwebhooks` package verifies from the receiver's side; loopback, private, link-local and metadata addresses
refused at connection time (a name resolving to loopback too); no redirect followed; time and answer bytes bounded."""

import http.server
import threading
import time
from collections.abc import Iterator

import pytest
from standardwebhooks import Webhook

from rewards.adapters import webhook_sender
from rewards.domain.webhooks import new_secret

SECRET = new_secret()


class Receiver(http.server.ThreadingHTTPServer):
    def __init__(self, answer):
        self.seen: list[tuple[dict, bytes]] = []
        self.answer = answer  # (handler) -> None: writes the response
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append((dict(self.headers.items()), body))
        self.server.answer(self)

    def log_message(self, *args):
        pass


def _ok(handler) -> None:
    handler.send_response(204)
    handler.end_headers()


def _redirect(handler) -> None:
    handler.send_response(302)
    handler.send_header("Location", "http://127.0.0.1:1/internal")
    handler.end_headers()


def _slow(handler) -> None:
    time.sleep(3)
    _ok(handler)


def _large(handler) -> None:
    handler.send_response(500)
    handler.send_header("Content-Length", str(1_000_000))
    handler.end_headers()
    handler.wfile.write(b"x" * 1_000_000)


@pytest.fixture
def receiver(request) -> Iterator[Receiver]:
    server = Receiver(getattr(request, "param", _ok))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


async def send(url: str, allow_private: bool = True, body: bytes = b'{"event_type":"webhook.test"}'):
    async with webhook_sender.client(allow_private) as http:
        return await webhook_sender.send(http, url, SECRET, "msg_1", body)


async def test_a_message_is_signed_as_standard_webhooks_verifies_it(receiver):
    attempt = await send(receiver.url)
    assert (attempt.ok, attempt.status_code, attempt.error) == (True, 204, None)
    [(headers, body)] = receiver.seen
    assert Webhook(SECRET).verify(body, headers) == {"event_type": "webhook.test"}
    assert headers["webhook-id"] == "msg_1" and headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://127.0.0.1/hook", "loopback"),
        ("https://[::1]/hook", "loopback"),
        ("https://169.254.169.254/latest/meta-data", "link-local or metadata"),
        ("https://10.1.2.3/hook", "private"),
        ("https://192.168.0.7/hook", "private"),
        ("https://[::ffff:127.0.0.1]/hook", "loopback"),
        ("https://localhost/hook", "loopback"),  # a name resolving to loopback: refused when connecting
    ],
)
async def test_addresses_inside_are_refused_when_connecting(url, why):
    attempt = await send(url, allow_private=False)
    assert not attempt.ok and attempt.status_code is None
    assert attempt.error.startswith("refused: ") and why in attempt.error, attempt.error


@pytest.mark.parametrize("receiver", [_redirect], indirect=True)
async def test_a_redirect_is_not_followed(receiver):
    attempt = await send(receiver.url)
    assert (attempt.ok, attempt.status_code, attempt.error) == (False, 302, "answered 302")
    assert len(receiver.seen) == 1


@pytest.mark.parametrize("receiver", [_slow], indirect=True)
async def test_a_slow_receiver_costs_at_most_the_timeout(receiver, monkeypatch):
    monkeypatch.setattr(webhook_sender, "TIMEOUT_S", 0.5)
    attempt = await send(receiver.url)
    assert not attempt.ok and attempt.status_code is None and "no answer within" in attempt.error
    assert attempt.duration_ms < 2000


@pytest.mark.parametrize("receiver", [_large], indirect=True)
async def test_a_large_answer_is_read_up_to_its_bound(receiver):
    attempt = await send(receiver.url)
    assert attempt.status_code == 500 and len(attempt.answer) == webhook_sender.MAX_ANSWER_BYTES
