"""The pipeline's check of where a partition resumes (stream_workers.faust_app: Pipeline._resumes, Pipeline.watch), on
a real broker: faust can lose messages of a partition around a rebalance and go on past them, so the first message
queued after a rebalance is checked against the first record at the group's committed offset, and a partition idle
while the log holds a record past its committed offset is read again; a delivery written for long is logged with its
lane's stack.

faust itself is left out (its loss is a race of its rebalance; tests/runtime/test_production_faults.py runs the whole
workers through joins and kills): the pipeline gets a stand-in of faust's app that reports an assignment and a
generation and records the seeks asked of it."""

import asyncio
import time
import uuid

import pytest
import structlog.testing
from aiokafka import AIOKafkaProducer
from faust.types import TP
from prometheus_client import REGISTRY

from rewards.adapters.production.kafka_positions import KafkaPositions
from stream_workers import faust_app
from stream_workers.batches import Message, Planner
from stream_workers.faust_app import Pipeline, Resources, WorkerOptions
from tests.support.kafka_helpers import new_topic


class _Consumer:
    def __init__(self, topic: str):
        self.assigned = {TP(topic, 0)}
        self.seeks: list[tuple[int, int]] = []

    def assignment(self) -> set:
        return self.assigned

    async def seek(self, tp: TP, offset: int) -> None:
        self.seeks.append((tp.partition, offset))


class _App:
    consumer_generation_id = 1

    def __init__(self, topic: str):
        self.consumer = _Consumer(topic)


@pytest.fixture
async def log(kafka_url):
    """A topic of one partition holding three committed records (each in a transaction of its own), and a
    KafkaPositions of a group that never committed there."""
    topic = await new_topic(kafka_url, "resume")
    producer = AIOKafkaProducer(bootstrap_servers=kafka_url, transactional_id=f"resume-{uuid.uuid4().hex}")
    await producer.start()
    offsets = []
    try:
        for value in (b"a", b"b", b"c"):
            async with producer.transaction():
                offsets.append((await (await producer.send(topic, value, partition=0))).offset)
    finally:
        await producer.stop()
    positions = await KafkaPositions.start(kafka_url, f"group-{uuid.uuid4().hex[:8]}", topic)
    yield topic, offsets, positions
    await positions.close()


def _pipeline(topic: str, positions: KafkaPositions) -> tuple[Pipeline, _App, Planner]:
    app, planner = _App(topic), Planner(None, 100)
    resources = Resources(state=None, warehouse=None, plans=None, positions=positions)
    pipeline = Pipeline(app, resources, planner, WorkerOptions())
    pipeline._rebalanced(app.consumer_generation_id)
    return pipeline, app, planner


def _rewinds() -> float:
    return REGISTRY.get_sample_value("rewards_worker_rewinds_total") or 0.0


async def test_a_queue_starting_past_a_record_at_the_committed_offset_is_read_again_from_there(log):
    topic, (first, second, third), positions = log
    pipeline, app, planner = _pipeline(topic, positions)
    planner.add([Message(topic, 0, offset, b"[]") for offset in (second, third)])  # the first one lost
    before = _rewinds()
    assert not await pipeline._resumes((topic, 0))
    assert app.consumer.seeks == [(0, 0)]  # never committed: from the partition's first offset
    assert planner.queued((topic, 0)) == 0 and _rewinds() == before + 1
    # Read again from there: the queue starts at the first record, and the partition is checked once.
    planner.add([Message(topic, 0, offset, b"[]") for offset in (first, second, third)])
    assert await pipeline._resumes((topic, 0)) and await pipeline._resumes((topic, 0))
    assert app.consumer.seeks == [(0, 0)]


async def test_an_idle_partition_is_read_again_only_if_the_log_holds_a_record_past_its_committed_offset(
    log, monkeypatch
):
    topic, _offsets, positions = log
    pipeline, app, _planner = _pipeline(topic, positions)
    monkeypatch.setattr(faust_app, "IDLE_S", 0.0)
    await pipeline._rewind_idle()  # idle, never committed, three records: read again
    assert app.consumer.seeks == [(0, 0)]

    pipeline, app, _planner = _pipeline(topic, positions)
    pipeline._active[(topic, 0)] = time.monotonic() + 3600  # got a message just now: not idle
    await pipeline._rewind_idle()
    assert app.consumer.seeks == []


async def test_a_partition_whose_log_ends_at_its_committed_offset_is_left_alone(kafka_url, monkeypatch):
    topic = await new_topic(kafka_url, "resume")
    positions = await KafkaPositions.start(kafka_url, f"group-{uuid.uuid4().hex[:8]}", topic)
    try:
        pipeline, app, _planner = _pipeline(topic, positions)
        monkeypatch.setattr(faust_app, "IDLE_S", 0.0)
        await pipeline._rewind_idle()
        assert app.consumer.seeks == []
    finally:
        await positions.close()


async def test_a_delivery_written_for_long_is_logged_with_where_its_lane_stands(log):
    topic, _offsets, positions = log
    pipeline, _app, _planner = _pipeline(topic, positions)
    hung = asyncio.Event()

    async def inserting_forever() -> None:
        await hung.wait()

    tp = (topic, 0)
    pipeline._lanes[tp] = asyncio.create_task(inserting_forever())
    await asyncio.sleep(0)
    try:
        pipeline._started[tp] = ("the-token", time.monotonic() - faust_app.LONG_WRITE_S - 1)
        with structlog.testing.capture_logs() as logs:
            pipeline._report_long_writes()
        [line] = [line for line in logs if line["event"] == "a delivery is still being written"]
        assert line["token"] == "the-token" and "inserting_forever" in line["stack"]
        pipeline._started[tp] = ("the-token", time.monotonic() - 10)  # not long yet
        with structlog.testing.capture_logs() as logs:
            pipeline._report_long_writes()
        assert logs == []
    finally:
        hung.set()
        await pipeline._lanes.pop(tp)
