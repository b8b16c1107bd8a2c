"""The production shape's own behaviour (faults, shared limits, worker metrics), against real Kafka, Redis
and ClickHouse and real separate processes."""

import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import SERVICE, event, evm
from tests.harness import Admin, Api, ProductionServer, free_port, stop_processes, wait_healthy

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


def test_broker_down_answers_503_and_accepts_nothing_then_the_same_batch_in_full(api, kafka_broker):
    api.put("/projects/config", json=CONFIG)
    events = [event(f"outage-{i}", user=evm(i)) for i in range(100)]
    kafka_broker.stop()
    try:
        started = time.monotonic()
        response = api.post("/events/batch", json={"events": events})
        assert response.status_code == 503 and response.headers["Retry-After"]
        assert time.monotonic() - started < 20
        assert api.get("/events/status", params={"dedup_id": "outage-0"}).json()["status"] == "not_found"
    finally:
        kafka_broker.start()
    deadline = time.monotonic() + 60
    while (response := api.post("/events/batch", json={"events": events})).status_code == 503:
        assert time.monotonic() < deadline, "the ingest API did not recover after the broker came back"
        time.sleep(1)
    assert response.json() == {"ingested_events": 100}  # its dedup ids were not burnt
    api.wait_processed(*(e["dedup_id"] for e in events), timeout_s=60)
    assert summary(api) == "700"


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


def test_workers_serve_prometheus_metrics(api, production_server):
    api.put("/projects/config", json=CONFIG)
    api.post("/events/batch", json={"events": [event("metrics-1")]})
    api.wait_processed("metrics-1", timeout_s=60)
    port = production_server.ports["worker_metrics"]
    metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    delivered = re.search(r"^rewards_worker_deliveries_total (\S+)$", metrics, re.MULTILINE)
    assert delivered is not None and float(delivered.group(1)) >= 1
