"""Back-pressure (rewards/web/backpressure.py): above the backlog bound the events endpoints answer 503 with
Retry-After and accept nothing of the batch; once the workers catch up, the same batch is accepted. The rule on
the embedded engines in-process (its worker held back, then started); the production shape's measure (the
workers' consumer lag) on a real Kafka broker, and its gauge on a running ingest process."""

import asyncio
import re
import uuid

import httpx
import pytest

from ingest_api.app import ROUTERS as INGEST_ROUTERS
from rewards.settings import Settings
from rewards.web.app import create_app
from rewards.web.backpressure import Backpressure
from runtime.wiring import open_embedded
from stream_workers.app import running_worker
from tests.conftest import SERVICE, event, evm
from tests.support.harness import Admin, Api

BOUND = 2


@pytest.fixture
async def held_back(tmp_path):
    """The embedded backends with their worker not running (yet), a bound of 2 measured on every request."""
    backends = await open_embedded(Settings(data_dir=tmp_path))
    backends.backpressure = Backpressure(backends.source, BOUND, refresh_s=0)
    app = create_app("Rewards", INGEST_ROUTERS, None, 1 << 20)
    app.state.backends = backends
    project = await backends.state.create_project("backpressure")
    key = await backends.state.create_key(project, [SERVICE])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://api/api/v1", headers={"Authorization": f"Bearer {key}"}
    ) as client:
        yield backends, client
    await backends.close()


async def test_above_the_bound_nothing_is_accepted_then_the_same_batch_is(held_back):
    backends, client = held_back
    for i in range(BOUND + 1):  # the backlog reaches 3 messages, above the bound of 2
        answer = await client.post("/events/batch", json={"events": [event(f"bp-{i}", user=evm(i))]})
        assert answer.status_code == 200 and answer.json() == {"ingested_events": 1}, answer.text
    batch = {"events": [event("bp-late", user=evm(9)), event("bp-late-2", user=evm(9))]}
    refused = await client.post("/events/batch", json=batch)
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
    body = refused.json()
    assert (body["statusCode"], body["error"]) == (503, "Service Unavailable")
    assert "3 messages behind (bound 2)" in body["message"] and "nothing accepted" in body["message"]
    single = await client.post("/events", json=event("bp-single", user=evm(8)))
    assert single.status_code == 503
    for dedup_id in ("bp-late", "bp-late-2", "bp-single"):
        status = await client.get("/events/status", params={"dedup_id": dedup_id})
        assert status.json()["status"] == "not_found"  # nothing of the refused batches was accepted
    assert await backends.source.backlog() == BOUND + 1

    # the workers catch up: below the bound, the same batch is accepted
    async with running_worker(backends.source, backends.state, backends.warehouse, backends.settings):
        for _ in range(200):
            if await backends.source.backlog() <= BOUND:
                break
            await asyncio.sleep(0.05)
        accepted = await client.post("/events/batch", json=batch)
    assert accepted.status_code == 200 and accepted.json() == {"ingested_events": 2}


async def test_state_changes_are_never_refused_for_the_backlog(held_back):
    _, client = held_back
    for i in range(BOUND + 1):
        await client.post("/events/batch", json={"events": [event(f"sc-{i}", user=evm(i))]})
    created = await client.post("/referral_codes", json={**_user(1), "quantity": 1})
    assert created.status_code == 201


def _user(n: int) -> dict:
    return {"user_identifier": evm(n), "user_identifier_type": "evm_address"}


async def test_a_backlog_that_cannot_be_measured_keeps_the_last_measure():
    class Flaky:
        def __init__(self):
            self.answers = [5, RuntimeError("broker away"), 1]

        async def backlog(self) -> int:
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

    pressure = Backpressure(Flaky(), 3, refresh_s=0)
    assert await pressure.backlog() == 5
    assert await pressure.backlog() == 5  # the failed measure left the last one
    await pressure.admit()  # 1: below the bound
    assert await Backpressure(Flaky(), 0, refresh_s=0).admit() is None  # no bound: never measured


# -- the production shape's measure ---------------------------------------------------------------------------


async def test_the_kafka_lag_is_what_the_group_has_not_committed(kafka_url):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from rewards.adapters.production.kafka_lag import KafkaLag
    from tests.support.kafka_helpers import new_topic

    topic, group = await new_topic(kafka_url, "lag", partitions=2), f"lag-group-{uuid.uuid4().hex[:8]}"
    lag = await KafkaLag.start(kafka_url, group, topic)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_url)
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_url, group_id=group, enable_auto_commit=False)
    await producer.start()
    await consumer.start()
    try:
        assert await measured(lag) == 0
        for i in range(5):
            await producer.send_and_wait(topic, b"m", partition=i % 2)
        assert await measured(lag) == 5  # a group that never committed: from each partition's beginning
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        await consumer.commit({TopicPartition(topic, 0): 2, TopicPartition(topic, 1): 1})
        assert await measured(lag) == 2  # partition 0: 3 - 2, partition 1: 2 - 1
    finally:
        await consumer.stop()
        await producer.stop()
        await lag.close()


async def measured(lag) -> int:
    """The lag, once the broker answers for the group (a new group's coordinator takes a moment)."""
    from aiokafka.errors import KafkaError

    for _ in range(100):
        try:
            return await lag.backlog()
        except KafkaError:
            await asyncio.sleep(0.1)
    return await lag.backlog()


def test_the_ingest_process_exports_the_backlog(production_server):
    admin = Admin(production_server)
    project = admin.project()
    with Api(production_server, admin.key(project, SERVICE), project) as api:
        assert api.post("/events/batch", json={"events": [event("gauge-1")]}).status_code == 200
        metrics = httpx.get(production_server.url + "/metrics").text
    assert re.search(r"^rewards_pipeline_backlog \d+\.\d+$", metrics, re.MULTILINE), metrics[-2000:]
