"""The production shape's own behaviour (faults, shared limits, worker metrics), against real Kafka, Redis
and ClickHouse and real separate processes."""

import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from rewards.domain.claim_checks import ClaimCheck, check_id
from rewards.domain.claim_signing import parse_signer_key
from rewards.domain.payout_config import TokenCurrency
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from tests.conftest import SERVICE, event, evm
from tests.ingest_api.test_claim_checks import SIGNER_KEY
from tests.support.harness import (
    Admin,
    Api,
    ProductionServer,
    free_port,
    metric_total,
    stop_processes,
    wait_healthy,
)

CONFIG = {
    "default_tier": None,
    "tiers": [],
    "conversions": [{"event_name": "purchase", "base": {"fixed": "7"}, "end_user_reward": {"rate": "1"}}],
}


@pytest.fixture
def admin(production_server) -> Admin:
    return Admin(production_server)


@pytest.fixture
def api(production_server, admin) -> Api:
    project = admin.project()
    with Api(production_server, admin.key(project, SERVICE), project) as client:
        yield client


def summary(api: Api) -> str:
    return api.get("/payouts/summary", params={"currency": "point"}).json()["total_payouts"]


def test_broker_down_every_publishing_endpoint_answers_503_changes_nothing_then_the_same_requests_succeed(
    api, production_server, kafka_broker
):
    """Events, referral codes (create, use), affiliates and claim checks (close, claim), in one outage."""
    api.put("/projects/config", json=CONFIG)
    events = [event(f"outage-{i}", user=evm(i)) for i in range(100)]
    publishing = Publishing(api, production_server)
    kafka_broker.stop()
    try:
        started = time.monotonic()
        # All at once: each request waits for the log's timeout (kafka_log.PUBLISH_TIMEOUT_S).
        publishing.fail_and_change_nothing(events=lambda: api.post("/events/batch", json={"events": events}))
        assert time.monotonic() - started < 20
        assert api.get("/events/status", params={"dedup_id": "outage-0"}).json()["status"] == "not_found"
    finally:
        kafka_broker.start()
    deadline = time.monotonic() + 60
    while (response := api.post("/events/batch", json={"events": events})).status_code == 503:
        assert time.monotonic() < deadline, "the ingest API did not recover after the broker came back"
        time.sleep(1)
    assert response.json() == {"ingested_events": 100}  # its dedup ids were not burnt
    publishing.succeed()
    api.wait_processed(*(e["dedup_id"] for e in events), timeout_s=60)
    assert summary(api) == "700"


# -- every endpoint that publishes, with the event log down -----------------------------------------------

CODE_OWNER, NEW_OWNER, REFERRED, AFFILIATE, TRADER = 101, 102, 103, 104, 105
HASH_1 = "0x" + "1" * 64
USDC = TokenCurrency(address="0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", chain_id=1, name="USDC", decimals=6)


def user(n: int) -> dict:
    return {"user_identifier": evm(n), "user_identifier_type": "evm_address"}


def assert_log_unavailable(response: httpx.Response) -> None:
    """503, the contract's error body, and a Retry-After (rewards.web.handlers' one handler for the event log)."""
    assert response.status_code == 503, response.text
    body = response.json()
    assert set(body) == {"statusCode", "error", "message"} and isinstance(body["message"], str), body
    assert body["statusCode"] == 503 and body["error"] == "Service Unavailable", body
    assert int(response.headers["Retry-After"]) >= 1


class Publishing:
    """One request of each endpoint that publishes besides the events ones (API.md §2, §4, §5), each of
    which would change the state store, and what tells whether the state store kept the change.

    Set up with the log up: a code of CODE_OWNER to use; TRADER's claim checks, `closed` ones (to claim)
    and `open` ones (to close), registered in the state store as the workers register them."""

    def __init__(self, api: Api, server):
        self.api, self.server = api, server
        self.code = self._created(api.post("/referral_codes", json={**user(CODE_OWNER), "quantity": 1}))[0]["code"]
        closed, still_open = _checks(api.project_id, "closed", 2), _checks(api.project_id, "open", 2)
        self._state(lambda state: state.register_claim_checks(api.project_id, closed + still_open))
        self.closed = [check.id for check in closed]
        self.open = [check.id for check in still_open]
        signer = parse_signer_key(SIGNER_KEY).sealed(())  # closing answers signed forms (API.md §7)
        self._state(lambda state: state.put_claim_signer(api.project_id, signer))
        assert self._close(self.closed).status_code == 200

    def requests(self) -> dict[str, Callable[[], httpx.Response]]:
        api = self.api
        return {
            "create codes": lambda: api.post("/referral_codes", json={**user(NEW_OWNER), "quantity": 2}),
            "use a code": lambda: api.patch(f"/referral_codes/{self.code}/use", json=user(REFERRED)),
            "register an affiliate": lambda: api.post("/affiliates", json={**user(AFFILIATE), "name": "Down"}),
            "close checks": lambda: self._close(self.open),
            "claim checks": lambda: self._claim(self.closed, HASH_1),
        }

    def fail_and_change_nothing(self, **more: Callable[[], httpx.Response]) -> None:
        """With the log down: every request (and `more`) answers 503, all sent at once, and the state store
        holds none of their changes."""
        requests = {**self.requests(), **more}
        with ThreadPoolExecutor(len(requests)) as pool:
            responses = dict(zip(requests, pool.map(lambda request: request(), requests.values()), strict=True))
        for name, response in responses.items():
            try:
                assert_log_unavailable(response)
            except AssertionError as error:
                raise AssertionError(f"{name}: {error}") from error
        project = self.api.project_id

        async def read(state):
            return (
                await state.list_codes(project, _user(NEW_OWNER), 0, 10),
                await state.get_code(project, self.code),
                await state.referral_of(project, _user(REFERRED)),
                await state.get_affiliate(project, _user(AFFILIATE)),
            )

        (codes, count), code, referral, affiliate = self._state(read)
        assert (codes, count) == ([], 0), "a code was created"
        assert code.current_uses == 0 and referral is None, "a use was counted"
        assert affiliate is None, "an affiliate was registered"
        # The open checks are still open: claiming them is a conflict, found before anything is published.
        assert self._claim(self.open, HASH_1).status_code == 409, "checks were closed"

    def succeed(self) -> None:
        """With the log back: the same requests succeed, each changing the state store once."""
        # Not claimed by HASH_1 while the log was down: closing a claimed check would be a conflict.
        assert self._close(self.closed).status_code == 200, "checks were claimed"
        responses = {name: _until_not_503(request) for name, request in self.requests().items()}
        assert len(self._created(responses["create codes"])) == 2
        used = responses["use a code"]
        assert used.status_code == 200 and used.json()["current_uses"] == 1, used.text
        assert responses["register an affiliate"].status_code == 201, responses["register an affiliate"].text
        closed = responses["close checks"]
        assert closed.status_code == 200 and [f["claim_check_id"] for f in closed.json()] == self.open, closed.text
        assert responses["claim checks"].json() == {"claimed": len(self.closed)}
        assert self.api.get("/referral_codes", params=user(NEW_OWNER)).json()["count"] == 2

    def _close(self, ids: list[str]) -> httpx.Response:
        return self.api.post("/claim-checks/close", json={**user(TRADER), "claim_check_ids": ids})

    def _claim(self, ids: list[str], tx_hash: str) -> httpx.Response:
        body = {"hash": tx_hash, "claimed_at": "2026-11-20T10:00:00Z", "claim_check_ids": ids}
        return self.api.post("/claim-checks/claims", json=body)

    @staticmethod
    def _created(response: httpx.Response) -> list[dict]:
        assert response.status_code == 201, response.text
        return response.json()

    def _state(self, action):
        return Admin(self.server)._do(action)


def _until_not_503(request: Callable[[], httpx.Response], timeout_s: float = 30) -> httpx.Response:
    """As a client does after a 503 (safe: nothing changed): the log's producers reconnect one by one."""
    deadline = time.monotonic() + timeout_s
    while (response := request()).status_code == 503 and time.monotonic() < deadline:
        time.sleep(float(response.headers["Retry-After"]))
    return response


def _user(n: int) -> User:
    return User(evm(n), "evm_address")


def _checks(project_id: str, kind: str, count: int) -> list[ClaimCheck]:
    return [
        ClaimCheck(
            id=check_id(project_id, f"{kind}-{i}"),
            user=_user(TRADER),
            currency=USDC,
            amount=1_000_000 * (i + 1),
            reason="end_user_payout",
            status="open",
            hash=None,
            source_id=f"{kind}-{i}",
            created_ms=now_ms(),
            claimed_ms=None,
            version=1,
        )
        for i in range(count)
    ]


def test_a_worker_killed_mid_stream_loses_nothing_and_writes_nothing_twice(api, admin, production_server):
    """10,000 events in 100 batches (10 keys: the limit is 10 batches a minute per key); the workers are
    SIGKILLed after the 40th batch and started again after the 60th."""
    api.put("/projects/config", json=CONFIG)
    keys = [admin.key(api.project_id, SERVICE) for _ in range(10)]
    batches = [[event(f"s{b}-{i}", user=evm(i)) for i in range(100)] for b in range(100)]
    for number, batch in enumerate(batches):
        with Api(production_server, keys[number % 10], api.project_id) as client:
            assert client.post("/events/batch", json={"events": batch}).json() == {"ingested_events": 100}
        if number == 40:
            production_server.processes["workers"].send_signal(signal.SIGKILL)
            production_server.processes["workers"].wait()
        if number == 60:
            production_server.start_workers()
    api.wait_processed(*(batch[0]["dedup_id"] for batch in batches), timeout_s=120)
    api.wait_processed(*(e["dedup_id"] for e in batches[-1]), timeout_s=60)
    assert summary(api) == "70000"  # 7 to the user of each event (CONFIG), each exactly once


def test_two_ingest_processes_share_one_rate_limit(api, production_server):
    port = free_port()
    command = [sys.executable, "-m", "rewards", "ingest-api", "--port", str(port)]
    second = subprocess.Popen(command, env=production_server.env)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", [second])
        other = ProductionServer.__new__(ProductionServer)
        other.urls = {"ingest": f"http://127.0.0.1:{port}", "query": production_server.urls["query"]}
        with Api(other, api.api_key, api.project_id) as api_2:
            statuses = [(api if n % 2 else api_2).post("/events/batch", json={"events": [event(f"rl-{n}")]})
                        for n in range(11)]  # fmt: skip
        assert [r.status_code for r in statuses] == [200] * 10 + [429]
        assert statuses[-1].headers["Retry-After"]
    finally:
        stop_processes([second])


DELIVERIES = re.compile(r"^rewards_worker_deliveries_total (\S+)$", re.MULTILINE)


def test_workers_serve_prometheus_metrics(api, production_server):
    api.put("/projects/config", json=CONFIG)
    api.post("/events/batch", json={"events": [event("metrics-1")]})
    api.wait_processed("metrics-1", timeout_s=60)
    for url in production_server.worker_metrics_urls:  # each worker process serves its own
        assert re.search(r"^rewards_worker_deliveries_total ", httpx.get(f"{url}/metrics", timeout=10).text, re.M), url
    assert metric_total(production_server.worker_metrics_urls, DELIVERIES) >= 1


def test_a_batch_left_in_flight_by_a_killed_ingest_process_is_taken_over_once_it_restarts(api, production_server):
    """Its claims are pending (here planted under its epoch, as a batch it was publishing when killed): the surviving
    process answers 503 while they are, and 200 seconds after the killed one restarts and fences its transactions,
    not when the claims lapse a minute later (PENDING_TTL_S)."""
    import uuid

    import redis

    instance = f"takeover-{uuid.uuid4().hex[:8]}"
    env = {**production_server.env, "REWARDS_INGEST_INSTANCE": instance}
    port = free_port()
    command = [sys.executable, "-m", "rewards", "ingest-api", "--port", str(port)]
    killed = subprocess.Popen(command, env=env)
    client = redis.Redis.from_url(production_server.env["REDIS_URL"], decode_responses=True)
    restarted = None
    try:
        wait_healthy(f"http://127.0.0.1:{port}", [killed])
        epoch = client.get(f"rw:ingest_owner:rewards-ingest-{instance}-0")
        client.set(f"rw:{{{api.project_id}}}:dedup:k-1", f"pending:{epoch}.in-flight", px=60_000)
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        batch = {"events": [event("k-1"), event("k-2")]}
        assert api.post("/events/batch", json=batch).status_code == 503  # in flight on the dead process
        started = time.monotonic()
        restarted = subprocess.Popen(command, env=env)
        wait_healthy(f"http://127.0.0.1:{port}", [restarted])
        # (polled in Redis, not by posting: the key's batch limit is 10 a minute)
        while not client.exists(f"rw:retired_epoch:{epoch}") and time.monotonic() - started < 30:
            time.sleep(0.2)
        answer = api.post("/events/batch", json=batch)
        assert answer.status_code == 200 and answer.json() == {"ingested_events": 2}
        assert time.monotonic() - started < 30  # not the claim's lapse (60 s)
        api.wait_processed("k-1", "k-2", timeout_s=30)
    finally:
        client.close()
        stop_processes([killed, restarted])


PROGRAM = {
    "default_tier": None,
    "tiers": [],
    "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"},
                     "end_user_reward": {"rate": "1"}}],
    "approval": {"currencies": ["point"], "above": "50"},
}  # fmt: skip


def test_reversals_and_approvals_under_two_workers_one_killed_land_exactly_once(api, admin, production_server):
    """Issue 30's owed fault test: 3,000 purchases (each paying its value in points; those above 50 held for approval)
    over two worker processes of one group, one SIGKILLed mid-stream and started again, while half of the early
    purchases are refunded and the held ones approved: every point lands once, each refund takes back exactly half."""
    assert api.put("/projects/config", json=PROGRAM).status_code == 200
    worker = [sys.executable, "-m", "rewards", "workers"]
    second = subprocess.Popen(worker, env=production_server.env)  # beside the session's own: one group of two
    third = None
    try:
        keys = [admin.key(api.project_id, SERVICE) for _ in range(10)]
        value = {n: 100 if n % 10 == 0 else 20 for n in range(3000)}  # one in ten held (100 > 50)
        batches = [[{**event(f"ra-{b}-{i}", user=evm(i % 50)), "args": {"value": {"amount": str(value[b * 100 + i])}}}
                    for i in range(100)] for b in range(30)]  # fmt: skip
        for number, batch in enumerate(batches):
            with Api(production_server, keys[number % 10], api.project_id) as client:
                assert client.post("/events/batch", json={"events": batch}).json() == {"ingested_events": 100}
            if number == 10:
                second.send_signal(signal.SIGKILL)
                second.wait()
            if number == 20:
                third = subprocess.Popen(worker, env=production_server.env)
            if number in (12, 24):  # half of batch 0-1's not-held purchases refunded, twice over the stream
                part = batches[number // 12 - 1]
                items = [{"dedup_id": e["dedup_id"], "reason": "refund", "fraction": "0.5"} for e in part
                         if e["args"]["value"]["amount"] == "20"]  # fmt: skip
                assert api.post("/events/reversals", json={"reversals": items}).status_code == 200
        api.wait_processed(*(e["dedup_id"] for batch in batches for e in batch[::10]), timeout_s=120)
        held = []
        while page := _held_page(api, len(held) // 100 + 1):
            held += page
        assert len(held) == 300  # 30 batches x 10
        for start in range(0, 300, 100):
            answer = api.post("/payouts/pending-approval/approve", json={"payout_ids": held[start : start + 100]})
            assert answer.json() == {"approved": 100}
        expected = 2700 * 20 + 300 * 100 - 2 * 90 * 10  # paid, approved, and 180 refunds of half of 20
        deadline = time.monotonic() + 90
        while summary(api) != str(expected) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert summary(api) == str(expected)
    finally:
        stop_processes([second, third])


def _held_page(api: Api, page: int) -> list[str]:
    answer = api.get("/payouts/pending-approval", params={"page_size": 100, "page": page})
    return [row["id"] for row in answer.json()["results"]]
