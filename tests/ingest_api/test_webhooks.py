"""API.md §10's endpoints API on both shapes (service_role): created with a secret shown once and stored sealed, read,
changed, rotated, deleted, at most 20; URLs that are not https:// or that reach an address inside refused (400 naming
why); their deliveries listed newest first in pages, redelivered, and gone with their endpoint; and, on a server whose
operator allows private addresses (development), a test message sent now to a real receiver, its signature verified
with the standardwebhooks package."""

import http.server
import threading
from dataclasses import replace

import pytest
from standardwebhooks import Webhook

from rewards.domain.timestamps import format_timestamp, now_ms
from rewards.domain.webhook_events import Delivery, new_delivery
from tests.support.harness import Admin, Api, Server, run_async
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
    assert api.get("/webhooks").json() == {"results": [shown], "total_count": 1, "next_page": None}
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


async def on_state(server, action):
    state = await server.open_state()
    try:
        return await action(state)
    finally:
        await state.close()


def held(api: Api, endpoint_id: str, subject: str, created_ms: int) -> Delivery:
    """A delivery as the dispatcher enqueues one, tried 3 times already and due in an hour: no dispatcher touches it
    before the test redelivers it."""
    body = b'{"event_type": "reward.earned"}'
    delivery = new_delivery(api.project_id, endpoint_id, "reward.earned", subject, body, created_ms)
    return replace(delivery, attempts=3, next_attempt_ms=now_ms() + 3_600_000, last_status_code=503,
                   last_error="answered 503")  # fmt: skip


def test_a_fresh_endpoint_has_no_deliveries_and_what_is_unknown_is_404(server, api: Api):
    made = create(api)
    empty = {"results": [], "total_count": 0, "next_page": None}
    assert api.get(f"/webhooks/{made['id']}/deliveries").json() == empty
    assert error_of(api.get("/webhooks/wh_000000000000000000000000/deliveries"), 404) == "Webhook endpoint not found"
    redeliver = f"/webhooks/{made['id']}/deliveries/msg_{'0' * 32}/redeliver"
    assert error_of(api.post(redeliver), 404) == "Webhook delivery not found"
    unknown = "/webhooks/wh_000000000000000000000000/deliveries/msg_0/redeliver"
    assert error_of(api.post(unknown), 404) == "Webhook endpoint not found"
    admin = Admin(server)
    other = admin.project()
    with Api(server, admin.key(other, "service_role"), other) as theirs:  # another project's endpoint is not theirs
        assert error_of(theirs.get(f"/webhooks/{made['id']}/deliveries"), 404) == "Webhook endpoint not found"
        assert error_of(theirs.post(redeliver), 404) == "Webhook endpoint not found"


@pytest.mark.parametrize("params", [{"page_size": 0}, {"page_size": 101}, {"page": 0}, {"page": "one"}])
def test_page_bounds_are_400(api: Api, params: dict):
    made = create(api)
    assert api.get("/webhooks", params=params).status_code == 400
    assert api.get(f"/webhooks/{made['id']}/deliveries", params=params).status_code == 400


def test_endpoints_are_listed_oldest_first_in_pages(api: Api):
    made = [create(api)["id"] for _ in range(3)]
    first = api.get("/webhooks", params={"page_size": 2}).json()
    assert ([e["id"] for e in first["results"]], first["total_count"], first["next_page"]) == (made[:2], 3, 2)
    last = api.get("/webhooks", params={"page": 2, "page_size": 2}).json()
    assert ([e["id"] for e in last["results"]], last["total_count"], last["next_page"]) == (made[2:], 3, None)
    assert api.get("/webhooks", params={"page": 3, "page_size": 2}).json() == {
        "results": [], "total_count": 3, "next_page": None}  # fmt: skip


def test_deliveries_are_listed_newest_first_in_pages_redelivered_and_gone_with_their_endpoint(server, api: Api):
    made = create(api)
    now = now_ms()
    deliveries = [held(api, made["id"], f"payout-{n}", now - (3 - n) * 1000) for n in range(3)]  # oldest first
    assert run_async(on_state(server, lambda state: state.enqueue(deliveries))) == 3
    path = f"/webhooks/{made['id']}/deliveries"
    first = api.get(path, params={"page_size": 2}).json()
    assert [d["id"] for d in first["results"]] == [deliveries[2].id, deliveries[1].id]
    assert (first["total_count"], first["next_page"]) == (3, 2)
    assert first["results"][0] == {
        "id": deliveries[2].id, "event_type": "reward.earned", "status": "pending", "attempts": 3,
        "last_status_code": 503, "last_error": "answered 503",
        "next_attempt_at": format_timestamp(deliveries[2].next_attempt_ms),
        "created_at": format_timestamp(deliveries[2].created_ms),
    }  # fmt: skip
    last = api.get(path, params={"page": 2, "page_size": 2}).json()
    assert [d["id"] for d in last["results"]] == [deliveries[0].id]
    assert (last["total_count"], last["next_page"]) == (3, None)
    assert [d["id"] for d in api.get(path).json()["results"]] == [d.id for d in reversed(deliveries)]

    before = now_ms()
    again = api.post(f"{path}/{deliveries[0].id}/redeliver")
    assert again.status_code == 202, again.text
    redelivered = again.json()
    assert (redelivered["id"], redelivered["status"], redelivered["attempts"]) == (deliveries[0].id, "pending", 3)
    assert redelivered["created_at"] == format_timestamp(deliveries[0].created_ms)
    assert format_timestamp(before) <= redelivered["next_attempt_at"] <= format_timestamp(now_ms())  # due now
    # A dispatcher may be trying it now (the embedded shape runs one): it fails without a network, or is pending.
    listed = {d["id"]: d for d in api.get(path).json()["results"]}[deliveries[0].id]
    assert listed["status"] in ("pending", "failed") and listed["attempts"] >= 3
    assert listed["created_at"] == redelivered["created_at"] and listed["event_type"] == "reward.earned"

    assert api.delete(f"/webhooks/{made['id']}").status_code == 200
    assert error_of(api.get(path), 404) == "Webhook endpoint not found"
    gone = run_async(on_state(server, lambda state: state.list_deliveries(api.project_id, made["id"], 0, 10)))
    assert gone == ([], 0)


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
