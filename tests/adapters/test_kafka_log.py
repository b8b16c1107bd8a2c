"""KafkaEventLog on a real Apache Kafka broker: one transaction and one message per publish (its failures
during an outage of the broker are tested in test_faust_workers, with the workers)."""

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from aiokafka.partitioner import DefaultPartitioner
from prometheus_client import REGISTRY

from rewards.adapters.production import kafka_log, process_index
from rewards.adapters.production.kafka_log import KafkaEventLog, PublishFailed
from rewards.adapters.production.migrate import create_topic
from rewards.adapters.production.process_index import ProcessIndex
from rewards.devengines import start_kafka
from schemas.records import dump_records
from schemas.topics import partition_key
from tests.support.kafka_helpers import PARTITIONS, conversions, end_offsets, engine, eventually, read_since

PROJECT = "kafka-log-project"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    return engine("kafka", "KAFKA_BOOTSTRAP_SERVERS", start_kafka, tmp_path_factory)


@pytest.fixture(scope="module")
async def event_log(kafka):
    await create_topic(kafka.url, PARTITIONS, 1)
    event_log = await KafkaEventLog.start(kafka.url, 4, shards=0)
    yield event_log
    await event_log.close()


async def test_publish_commits_one_message_per_call(kafka, event_log):
    before = await end_offsets(kafka.url)
    batches = [conversions(PROJECT, f"one-{i}", 3) for i in range(3)]
    for records in batches:
        await event_log.publish(PROJECT, dump_records(records))

    async def visible():
        # The broker writes the commit markers just after answering the commit: visibility lags a moment.
        messages = await read_since(kafka.url, before, "read_committed")
        assert len(messages) == len(batches)
        return messages

    messages = await eventually(visible, timeout_s=5, every_s=0.05)
    assert [m.value for m in messages] == [dump_records(records) for records in batches]
    assert {m.key for m in messages} == {partition_key(PROJECT)}
    assert len({m.partition for m in messages}) == 1  # a project's batches stay in order on one partition
    # Each publish is a transaction of its own: one message, then its commit marker.
    after = await end_offsets(kafka.url)
    assert sum(after.values()) - sum(before.values()) == 2 * len(batches)


async def test_concurrent_publishes_share_the_pool(kafka, event_log):
    before = await end_offsets(kafka.url)
    await asyncio.gather(
        *(event_log.publish(f"{PROJECT}-{i}", dump_records(conversions(PROJECT, f"c{i}", 2))) for i in range(40))
    )

    async def visible():
        assert len(await read_since(kafka.url, before, "read_committed")) == 40

    await eventually(visible, timeout_s=5, every_s=0.05)


async def test_a_spread_batch_is_one_message_per_partition_in_one_transaction(kafka, event_log, monkeypatch):
    """publish_shards: each part on the partition asked for, all committed together; one part refused, none of them
    is ever visible."""
    assert event_log.shards == PARTITIONS  # shards=0: all of the topic's
    before = await end_offsets(kafka.url)
    parts = {shard: dump_records(conversions(PROJECT, f"spread-{shard}", 2)) for shard in (0, 2, 3)}
    await event_log.publish_shards(PROJECT, parts)

    async def visible():
        messages = await read_since(kafka.url, before, "read_committed")
        assert len(messages) == 3
        return messages

    messages = await eventually(visible, timeout_s=5, every_s=0.05)
    # Shard 0 on the project's own partition (where Kafka's default partitioner puts its other records), the others
    # on the partitions after it.
    own = DefaultPartitioner()(partition_key(PROJECT), list(range(PARTITIONS)), list(range(PARTITIONS)))
    assert {m.partition: m.value for m in messages} == {(own + shard) % PARTITIONS: p for shard, p in parts.items()}
    assert {m.key for m in messages} == {partition_key(PROJECT)}  # keyed by project still, for consumers
    after = await end_offsets(kafka.url)
    assert sum(after.values()) - sum(before.values()) == 3 + 3  # three messages, a commit marker on each partition

    before = after
    poisoned = {0: dump_records(conversions(PROJECT, "fine", 1)), 1: dump_records(conversions(PROJECT, "poison", 1))}
    for slot in event_log._slots:
        send = (await slot.ready()).send

        async def poisoned_send(topic, payload, key, partition=None, send=send):
            if b'"poison"' in payload:
                raise RuntimeError("this message cannot be sent")
            return await send(topic, payload, key=key, partition=partition)

        monkeypatch.setattr(slot.producer, "send", poisoned_send)
    with pytest.raises(PublishFailed):
        await event_log.publish_shards(PROJECT, poisoned)
    monkeypatch.undo()
    await event_log.publish(PROJECT, dump_records(conversions(PROJECT, "after", 1)))

    async def only_the_last():
        messages = await read_since(kafka.url, before, "read_committed")
        assert [m.value for m in messages] == [dump_records(conversions(PROJECT, "after", 1))]

    await eventually(only_the_last, timeout_s=5, every_s=0.05)


async def test_a_shard_count_is_at_most_the_partitions_and_one_spreads_nothing(kafka):
    for asked, shards in ((1, 1), (2, 2), (PARTITIONS + 5, PARTITIONS)):
        event_log = await KafkaEventLog.start(kafka.url, 1, shards=asked)
        try:
            assert (event_log.shards, event_log.partitions) == (shards, PARTITIONS)
        finally:
            await event_log.close()


async def test_publishes_waiting_together_share_one_transaction_all_or_none(kafka, monkeypatch):
    """With one producer, the publishes queued while a transaction is in flight go in the next one
    together: one failing send fails them all, and none of them is ever visible."""
    before = await end_offsets(kafka.url)
    event_log = await KafkaEventLog.start(kafka.url, 1)
    (slot,) = event_log._slots
    send = slot.producer.send

    async def poisoned_send(topic, payload, key, partition=None):
        if b'"poison"' in payload:
            raise RuntimeError("this message cannot be sent")
        return await send(topic, payload, key=key, partition=partition)

    monkeypatch.setattr(slot.producer, "send", poisoned_send)
    try:
        first = asyncio.create_task(event_log.publish(PROJECT, dump_records(conversions(PROJECT, "alone", 1))))
        await asyncio.sleep(0)  # the producer takes it: its transaction is in flight
        payloads = [dump_records(conversions(PROJECT, b, 1)) for b in ("ok", "poison", "ok2")]
        grouped = [event_log.publish(PROJECT, payload) for payload in payloads]
        outcomes = await asyncio.gather(*grouped, return_exceptions=True)
        await first
        await event_log.publish(PROJECT, dump_records(conversions(PROJECT, "after", 1)))
    finally:
        await event_log.close()
    assert [type(outcome).__name__ for outcome in outcomes] == ["PublishFailed"] * 3

    async def visible():
        messages = await read_since(kafka.url, before, "read_committed")
        assert len(messages) == 2
        return messages

    messages = await eventually(visible, timeout_s=5, every_s=0.05)
    assert [m.value for m in messages] == [dump_records(conversions(PROJECT, b, 1)) for b in ("alone", "after")]


# -- transactional ids stable per process slot: a restart fences the dead ------------------------------------

ROOT = Path(__file__).resolve().parents[2]
ZOMBIE_TIMEOUT_MS = 60_000  # the dead process's transaction timeout: without fencing, readers wait this long


@pytest.fixture
def instance() -> str:
    """An ingest instance of this test alone; its lock files (production.process_index) removed after."""
    name = f"test-{uuid.uuid4().hex[:8]}"
    yield name
    for path in Path(process_index.lock_dir()).glob(f"rewards-ingest-{name}*.lock"):
        path.unlink()


def test_the_process_index_is_the_lowest_free_one_of_its_instance(instance):
    first, second = ProcessIndex.claim(instance), ProcessIndex.claim(instance)
    other = ProcessIndex.claim(instance + "-other")
    assert (first.index, second.index, other.index) == (0, 1, 0)
    first.release()  # as when its process dies: the next one takes its index, hence its ids
    again = ProcessIndex.claim(instance)
    assert again.index == 0
    for held in (second, other, again):
        held.release()


def test_a_lock_file_removed_under_its_process_is_taken_back(instance, tmp_path):
    """An age-based cleaner of the temp dir removing a held lock file must not let a new process take the index."""
    held = ProcessIndex.claim(instance, str(tmp_path))
    old = time.time() - 30 * 86400
    os.utime(held.path, (old, old))
    assert held.keep() and os.stat(held.path).st_mtime > old + 86400  # touched: cleaners by age pass it by
    os.unlink(held.path)
    assert held.keep()  # created and locked again
    newcomer = ProcessIndex.claim(instance, str(tmp_path))
    assert newcomer.index == 1  # so a newcomer takes the next index
    os.unlink(held.path)
    thief = ProcessIndex.claim(instance, str(tmp_path))  # removed, and taken before the holder noticed
    assert thief.index == 0
    lost = REGISTRY.get_sample_value("rewards_process_index_lost_total") or 0
    assert not held.keep()
    assert REGISTRY.get_sample_value("rewards_process_index_lost_total") == lost + 1
    for index in (thief, held, newcomer):
        index.release()


async def test_a_restarted_process_fences_its_dead_predecessor_at_once(kafka, event_log, instance):
    """A process killed with a transaction open holds back read_committed readers of that partition until
    the transaction times out, unless its restart (same instance, same transactional ids) fences it."""
    before = await end_offsets(kafka.url)
    command = [sys.executable, "-m", "tests.support.kafka_open_transaction", kafka.url, instance, PROJECT]
    zombie = subprocess.Popen([*command, str(ZOMBIE_TIMEOUT_MS)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = ""
        while not line.startswith("open"):  # past its log lines
            line = await asyncio.to_thread(zombie.stdout.readline)
            assert line, "the process exited before opening its transaction"
        assert line.startswith(f"open rewards-ingest-{instance}-0-0"), line
    finally:
        zombie.kill()  # SIGKILL: its transaction stays open on the broker
        zombie.wait(10)
        zombie.stdout.close()
    held, after = (dump_records(conversions(PROJECT, batch, 1)) for batch in ("held", "after"))

    # Another instance (as every restart was when the ids had the pid in them): committed, yet held back.
    other = await KafkaEventLog.start(kafka.url, 1, instance + "-other")
    try:
        await other.publish(PROJECT, held)
    finally:
        await other.close()
    await asyncio.sleep(3)
    assert await read_since(kafka.url, before, "read_committed") == []

    # The same instance restarted: its producer's initialisation fences the dead one and aborts its transaction.
    started = time.monotonic()
    restarted = await KafkaEventLog.start(kafka.url, 1, instance)
    try:
        assert restarted._slots[0].transactional_id == f"rewards-ingest-{instance}-0-0"
        await restarted.publish(PROJECT, after)

        async def visible():
            messages = await read_since(kafka.url, before, "read_committed")
            assert len(messages) == 2
            return messages

        messages = await eventually(visible, timeout_s=ZOMBIE_TIMEOUT_MS / 1000, every_s=0.05)
        stall = time.monotonic() - started
    finally:
        await restarted.close()
    assert [m.value for m in messages] == [held, after]  # the dead one's message aborted, never seen
    assert stall < ZOMBIE_TIMEOUT_MS / 1000 / 6, f"readers stalled {stall:.1f} s after the restart"


async def test_a_producer_fenced_by_another_with_its_id_is_counted_and_replaced(kafka, event_log, instance):
    """Two live producers sharing an id (two live processes of one instance, on two machines) fence each
    other: the fenced one's publish fails, is counted, and its slot gets a new producer (fencing the other)."""
    event_log = await KafkaEventLog.start(kafka.url, 1, instance)
    (slot,) = event_log._slots
    intruder = await kafka_log._start_producer(kafka.url, slot.transactional_id)
    fenced_before = REGISTRY.get_sample_value("rewards_kafka_producers_fenced_total") or 0
    try:
        with pytest.raises(PublishFailed):
            await event_log.publish(PROJECT, dump_records(conversions(PROJECT, "fenced", 1)))
        assert REGISTRY.get_sample_value("rewards_kafka_producers_fenced_total") == fenced_before + 1
        await event_log.publish(PROJECT, dump_records(conversions(PROJECT, "replaced", 1)))
    finally:
        await kafka_log._stop(intruder)
        await event_log.close()


async def test_the_instance_is_rewards_ingest_instance_else_the_host_name(kafka, event_log, monkeypatch, instance):
    monkeypatch.setenv("REWARDS_INGEST_INSTANCE", instance)
    first = await KafkaEventLog.start(kafka.url, 2)
    try:
        second = await KafkaEventLog.start(kafka.url, 1)  # live beside the first: the next index
        await second.close()
        assert [s.transactional_id for s in first._slots + second._slots] == [
            f"rewards-ingest-{instance}-0-0",
            f"rewards-ingest-{instance}-0-1",
            f"rewards-ingest-{instance}-1-0",
        ]
    finally:
        await first.close()
    monkeypatch.delenv("REWARDS_INGEST_INSTANCE")
    assert event_log._slots[0].transactional_id.startswith(f"rewards-ingest-{kafka_log.socket.gethostname()}-")
