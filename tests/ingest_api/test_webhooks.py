"""API.md §10's endpoints API on both shapes (service_role): created with a secret shown once and stored sealed, read,
changed, rotated, deleted, at most 20; URLs that are not https:// or that reach an address inside refused (400 naming
why); and, on a server whose operator allows private addresses (development), a test message sent now to a real
receiver, its signature verified with the standardwebhooks package."""

import http.server
import threading

import pytest
from standardwebhooks import Webhook

from tests.support.harness import Admin, Api, Server
from tests.web.test_auth import error_of

PUBLIC = "https://93.184.216.34/rewards"  # a public address (no DNS needed)


@pytest.fixture
def api(server):
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    yield api
    api.close()


def create(api: Api, **fields) -> dict:
    answer = api.post("/webhooks", json={"url": PUBLIC, "events": ["reward.earned"], **fields})
    assert answer.status_code == 201, answer.text
    return answer.json()


def test_an_endpoint_is_created_read_changed_rotated_and_deleted(api: Api):
    made = create(api, description="our backend", events=["reward.earned", "claim_check.closed"])
    assert made["secret"].startswith("whsec_") and made["enabled"] is True
    assert (made["url"], made["events"], made["description"]) == (PUBLIC, ["reward.earned", "claim_check.closed"],
                                                                  "our backend")  # fmt: skip
    shown = api.get(f"/webhooks/{made['id']}").json()
    assert "secret" not in shown and shown == {k: v for k, v in made.items() if k != "secret"}
    assert [e["id"] for e in api.get("/webhooks").json()] == [made["id"]]
    changed = api.patch(f"/webhooks/{made['id']}", json={"enabled": False, "description": None})
    assert changed.status_code == 200 and (changed.json()["enabled"], changed.json()["description"]) == (False, None)
    rotated = api.post(f"/webhooks/{made['id']}/rotate-secret").json()
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != made["secret"]
    assert api.delete(f"/webhooks/{made['id']}").json() == {"id": made["id"], "deleted": True}
    assert error_of(api.get(f"/webhooks/{made['id']}"), 404) == "Webhook endpoint not found"
    assert error_of(api.delete(f"/webhooks/{made['id']}"), 404)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://93.184.216.34/hook", "url must be https://"),
        ("https://127.0.0.1/hook", "url must not reach a loopback address (127.0.0.1)"),
        ("https://[::1]/hook", "url must not reach a loopback address (::1)"),
        ("https://169.254.169.254/latest", "url must not reach a link-local or metadata address (169.254.169.254)"),
        ("https://10.0.0.7/hook", "url must not reach a private address (10.0.0.7)"),
        ("https://localhost/hook", "url must not reach a loopback address"),
        ("https://user:pass@93.184.216.34/hook", "url must not carry credentials"),
        ("ftp://93.184.216.34/", "url must be https://"),
    ],
)
def test_urls_inside_or_not_https_are_400_naming_why(api: Api, url: str, message: str):
    answer = api.post("/webhooks", json={"url": url, "events": ["reward.earned"]})
    assert error_of(answer, 400).startswith(message)


def test_bad_fields_and_the_21st_endpoint_are_refused(api: Api):
    unknown = api.post("/webhooks", json={"url": PUBLIC, "events": ["reward.won"]})
    assert "unknown event type 'reward.won'" in error_of(unknown, 400)
    assert api.post("/webhooks", json={"url": PUBLIC, "events": []}).status_code == 400
    assert api.post("/webhooks", json={"url": PUBLIC, "events": ["reward.earned"], "extra": 1}).status_code == 400
    made = [create(api) for _ in range(20)]
    assert error_of(api.post("/webhooks", json={"url": PUBLIC, "events": ["reward.earned"]}), 409) == (
        "a project has at most 20 webhook endpoints")  # fmt: skip
    assert api.patch(f"/webhooks/{made[0]['id']}", json={"url": "https://127.0.0.1/x"}).status_code == 400
    assert api.patch(f"/webhooks/{made[0]['id']}", json={"enabled": None}).status_code == 400


def test_a_standard_key_cannot_manage_endpoints(server, api: Api):
    admin = Admin(server)
    standard = Api(server, admin.key(api.project_id), api.project_id)
    assert standard.get("/webhooks").status_code == 403
    standard.close()


class _Receiver(http.server.ThreadingHTTPServer):
    def __init__(self):
        self.seen: list[tuple[dict, bytes]] = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.server.seen.append((dict(self.headers.items()), self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def developing(tmp_path_factory):
    """An embedded server whose operator allows http:// and private addresses (REWARDS_WEBHOOKS_ALLOW_PRIVATE)."""
    server = Server(tmp_path_factory.mktemp("webhooks"), env={"REWARDS_WEBHOOKS_ALLOW_PRIVATE": "1"}).start()
    yield server
    server.stop()


def test_a_test_message_reaches_a_real_receiver_signed(developing):
    receiver = _Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    admin = Admin(developing)
    project = admin.project()
    api = Api(developing, admin.key(project, "service_role"), project)
    url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    made = create(api, url=url)
    attempt = api.post(f"/webhooks/{made['id']}/test").json()
    assert (attempt["delivered"], attempt["status_code"], attempt["error"]) == (True, 200, None)
    [(headers, body)] = receiver.seen
    message = Webhook(made["secret"]).verify(body, headers)
    assert message["event_type"] == "webhook.test" and message["data"]["endpoint_id"] == made["id"]
    assert headers["webhook-id"] == attempt["webhook_id"]
    receiver.shutdown()
    receiver.server_close()
    gone = api.post(f"/webhooks/{made['id']}/test").json()  # the receiver is gone: not delivered, said why
    assert gone["delivered"] is False and gone["status_code"] is None and gone["error"]
    api.close()
