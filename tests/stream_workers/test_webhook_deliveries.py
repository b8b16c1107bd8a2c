"""API.md §10's deliveries on both shapes, to real HTTP receivers: what the pipeline wrote reaches each endpoint
subscribed, signed (verified with the standardwebhooks package, receiver-side), `reward.earned` with the hosted
service's body exactly; a failed attempt is tried again under the same `webhook-id`; a receiver that hangs delays no
other endpoint; a 410 disables its endpoint; and on the production shape a dispatcher killed mid-delivery (SIGKILL)
loses nothing once restarted.

Each shape is a stack of this module's own whose operator allows http:// and private addresses (the receivers listen
on 127.0.0.1); the production one has its own Kafka broker (its workers and dispatcher are groups of their own)."""

import http.server
import os
import signal
import threading
import time
from collections import Counter

import pytest
from standardwebhooks import Webhook

from tests.conftest import evm
from tests.support.harness import Admin, Api, ProductionServer, Server, eventually

EVM = "evm_address"
ALICE, BOB = evm(11), evm(12)
CONFIG = {
    "default_tier": "base",
    "tiers": [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0", "r3": "0", "r4": "0"}}],
    "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"},
                     "end_user_reward": {"fixed": "10"}}],
}  # fmt: skip
DEVELOPMENT = {"REWARDS_WEBHOOKS_ALLOW_PRIVATE": "1", "REWARDS_WEBHOOKS_LEASE_S": "3"}


class Receiver(http.server.ThreadingHTTPServer):
    """A project's backend: records every request; answers per path: /ok 200, /flaky 500 for the first `failures`
    requests then 200, /hang after 30 s (past the sender's bound), /gone 410, /slow 200 after 1 s."""

    daemon_threads = True

    def __init__(self, failures: int = 1):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[str, dict, bytes]] = []
        self.failures = failures
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def bodies(self, path: str) -> list[tuple[dict, bytes]]:
        with self.lock:
            return [(headers, body) for seen_path, headers, body in self.seen if seen_path == path]

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            self.server.seen.append((self.path, dict(self.headers.items()), body))
            flaky_calls = sum(1 for path, _, _ in self.server.seen if path == "/flaky")
        status = 200
        if self.path == "/hang":
            time.sleep(30)
        elif self.path == "/slow":
            time.sleep(1)
        elif self.path == "/gone":
            status = 410
        elif self.path == "/flaky" and flaky_calls <= self.server.failures:
            status = 500
        try:
            self.send_response(status)
            self.end_headers()
        except OSError:  # the sender gave up (a hanging answer)
            pass

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def webhook_kafka(tmp_path_factory):
    from tests.support.real_engines import _own_engine

    yield from _own_engine("kafka", tmp_path_factory.mktemp("webhook-kafka"))


@pytest.fixture(scope="module", params=["embedded", "production"])
def stack(request, tmp_path_factory):
    if request.param == "embedded":
        server = Server(tmp_path_factory.mktemp("webhooks-embedded"), env=DEVELOPMENT).start()
    else:
        kafka = request.getfixturevalue("webhook_kafka")
        engines = {
            "KAFKA_BOOTSTRAP_SERVERS": kafka.url,
            "REDIS_URL": request.getfixturevalue("redis_url"),
            "CLICKHOUSE_URL": request.getfixturevalue("clickhouse_url"),
        }
        server = ProductionServer(engines, env=DEVELOPMENT, webhooks=True).start()
    yield server
    server.stop()


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


def project_api(stack) -> Api:
    admin = Admin(stack)
    project = admin.project()
    api = Api(stack, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    return api


def subscribe(api: Api, url: str, events: list[str] | None = None) -> dict:
    answer = api.post("/webhooks", json={"url": url, "events": events or ["reward.earned"]})
    assert answer.status_code == 201, answer.text
    return answer.json()


def buy(api: Api, *dedup_ids: str, user: str = BOB) -> None:
    events = [{"name": "purchase", "user_identifier": user, "user_identifier_type": EVM, "dedup_id": dedup_id,
               "args": {"value": {"amount": "30"}}} for dedup_id in dedup_ids]  # fmt: skip
    assert api.post("/events/batch", json={"events": events}).status_code == 200


def messages(receiver: Receiver, path: str, secret: str) -> list[tuple[str, dict]]:
    """(webhook-id, body) of each request on `path`, its signature verified as a receiver does."""
    return [(headers["webhook-id"], Webhook(secret).verify(body, headers)) for headers, body in receiver.bodies(path)]


def test_reward_earned_is_the_hosted_services_body_signed(stack, receiver):
    api = project_api(stack)
    endpoint = subscribe(api, receiver.url("/ok"))
    buy(api, "w-1")

    def delivered():
        [(webhook_id, body)] = messages(receiver, "/ok", endpoint["secret"])
        return webhook_id, body

    webhook_id, body = eventually(delivered, timeout_s=20)
    assert webhook_id.startswith("msg_")
    created_at = body["movement"].pop("created_at")
    assert created_at.endswith("Z") and created_at[:2] == "20"
    assert body == {
        "event_type": "reward.earned",
        "movement": {
            "type": "point", "reason": "end_user_payout", "status": "accepted", "status_details": None,
            "user_identifier": BOB, "user_identifier_type": EVM, "amount": "10",
            "currency": {"name": "POINT", "address": None, "chain_id": None}, "conversion_name": "purchase",
        },
    }  # fmt: skip
    api.close()


def test_events_before_an_endpoint_and_of_other_types_are_not_sent(stack, receiver):
    api = project_api(stack)
    buy(api, "w-before")
    api.wait_processed("w-before")
    endpoint = subscribe(api, receiver.url("/ok"), ["referral.created"])
    code = api.post("/referral_codes", json={"user_identifier": ALICE, "user_identifier_type": EVM,
                                             "quantity": 1}).json()[0]["code"]  # fmt: skip
    assert api.patch(f"/referral_codes/{code}/use", json={"user_identifier": BOB,
                                                          "user_identifier_type": EVM}).status_code == 200  # fmt: skip
    buy(api, "w-after")
    [(_, body)] = eventually(lambda: _exactly(messages(receiver, "/ok", endpoint["secret"]), 1), timeout_s=20)
    assert body["event_type"] == "referral.created"
    assert (body["data"]["code"], body["data"]["user_identifier"]) == (code, BOB)
    api.wait_processed("w-after")
    time.sleep(1.5)  # what was processed had its time to be sent: still nothing but the referral
    assert len(receiver.bodies("/ok")) == 1
    api.close()


def test_each_kind_of_change_is_its_event(stack, receiver):
    api = project_api(stack)
    held = {**CONFIG, "approval": {"currencies": ["point"], "above": "5"}}
    assert api.put("/projects/config", json=held).status_code == 200
    every = ["reward.earned", "reward.reversed", "referral.created", "affiliate.registered", "payout.pending_approval"]
    endpoint = subscribe(api, receiver.url("/ok"), every)
    carol = evm(13)
    registered = api.post(
        "/affiliates", json={"address": carol, "identifier_type": EVM, "name": "Carol", "code": "CAROL"}
    )
    assert registered.status_code == 201, registered.text
    code = api.post("/referral_codes", json={"user_identifier": ALICE, "user_identifier_type": EVM,
                                             "quantity": 1}).json()[0]["code"]  # fmt: skip
    assert api.patch(f"/referral_codes/{code}/use", json={"user_identifier": BOB,
                                                          "user_identifier_type": EVM}).status_code == 200  # fmt: skip
    buy(api, "w-kinds")  # BOB's 10 held for approval (above 5), ALICE's commission of 3 paid
    api.wait_processed("w-kinds")
    reversed_ = api.post("/events/reversals", json={"reversals": [{"dedup_id": "w-kinds", "reason": "refund",
                                                                   "fraction": "0.5"}]})  # fmt: skip
    assert reversed_.status_code == 200, reversed_.text

    def kinds():
        got = [body for _, body in _verified(receiver, "/ok", endpoint["secret"])]
        found = sorted((b["event_type"], _status(b)) for b in got)
        assert found == sorted([
            ("affiliate.registered", None), ("referral.created", None),
            ("reward.earned", "accepted"), ("reward.earned", "pending"), ("payout.pending_approval", None),
            ("reward.reversed", None),
        ]), found  # fmt: skip
        return got

    got = eventually(kinds, timeout_s=30)
    by_type = {body["event_type"]: body for body in got if body["event_type"] != "reward.earned"}
    assert by_type["affiliate.registered"]["data"]["user_identifier"] == carol
    assert by_type["payout.pending_approval"]["data"]["total_amount"] == "10"
    reversing = by_type["reward.reversed"]["data"]
    assert (reversing["user_identifier"], reversing["total_amount"], reversing["reversal"]) == (ALICE, "-1.5", True)
    api.close()


def _status(body: dict) -> str | None:
    return body["movement"]["status"] if body["event_type"] == "reward.earned" else None


def test_a_failed_attempt_is_tried_again_under_the_same_id(stack, receiver):
    api = project_api(stack)
    endpoint = subscribe(api, receiver.url("/flaky"))
    buy(api, "w-flaky")
    # the first attempt answered 500; the next one, about 5 s later, 200
    tried = eventually(lambda: _exactly(messages(receiver, "/flaky", endpoint["secret"]), 2), timeout_s=30)
    assert tried[0] == tried[1]
    api.close()


def test_a_hanging_receiver_delays_no_other_endpoint(stack, receiver):
    stuck, healthy = project_api(stack), project_api(stack)
    subscribe(stuck, receiver.url("/hang"))
    same_project = subscribe(stuck, receiver.url("/ok"))
    other_project = subscribe(healthy, receiver.url("/ok"))
    buy(stuck, *[f"w-hang-{n}" for n in range(20)])
    time.sleep(0.5)  # the hanging endpoint's attempts are in flight
    buy(healthy, "w-healthy")
    started = time.monotonic()
    eventually(lambda: _exactly(_verified(receiver, "/ok", other_project["secret"]), 1), timeout_s=20)
    eventually(lambda: _exactly(_verified(receiver, "/ok", same_project["secret"]), 20), timeout_s=20)
    assert time.monotonic() - started < 10  # long before the hanging attempts' 10 s end
    stuck.close()
    healthy.close()


def test_an_endpoint_answering_410_is_disabled(stack, receiver):
    api = project_api(stack)
    endpoint = subscribe(api, receiver.url("/gone"))
    buy(api, "w-gone")
    eventually(lambda: _exactly(receiver.bodies("/gone"), 1), timeout_s=20)
    eventually(lambda: _is(api.get(f"/webhooks/{endpoint['id']}").json()["enabled"], False), timeout_s=10)
    api.close()


@pytest.mark.parametrize("stack", ["production"], indirect=True)  # a process of its own there (embedded: the server's)
def test_a_dispatcher_killed_mid_delivery_loses_nothing(stack, receiver):
    api = project_api(stack)
    endpoint = subscribe(api, receiver.url("/slow"))
    ids = [f"w-kill-{n}" for n in range(30)]
    buy(api, *ids)
    eventually(lambda: _at_least(receiver.bodies("/slow"), 1), timeout_s=20)  # attempts are in flight
    os.kill(stack.processes["webhooks"].pid, signal.SIGKILL)
    stack.processes["webhooks"].wait()
    stack.start_webhooks()
    got = eventually(lambda: _covering(_verified(receiver, "/slow", endpoint["secret"]), 30), timeout_s=60)
    assert all(body["event_type"] == "reward.earned" for _, body in got)
    counts = Counter(webhook_id for webhook_id, _ in got)
    assert len(counts) == 30  # every payout's event, each under one id (a repeat carries the same)
    api.close()


def _verified(receiver: Receiver, path: str, secret: str) -> list[tuple[str, dict]]:
    found = []
    for headers, body in receiver.bodies(path):
        try:
            found.append((headers["webhook-id"], Webhook(secret).verify(body, headers)))
        except Exception:  # another endpoint's message on the same path
            continue
    return found


def _exactly(items: list, count: int) -> list:
    assert len(items) == count, items
    return items


def _at_least(items: list, count: int) -> list:
    assert len(items) >= count, items
    return items


def _covering(items: list[tuple[str, dict]], distinct: int) -> list:
    assert len({webhook_id for webhook_id, _ in items}) == distinct, len(items)
    return items


def _is(value, expected) -> None:
    assert value == expected
