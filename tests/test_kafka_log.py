"""KafkaEventLog on a real Apache Kafka broker: one transaction and one message per publish (its failures
during an outage of the broker are tested in test_faust_workers, with the workers)."""

import asyncio

import pytest

from rewards.devengines import start_kafka
from rewards.production.kafka_log import KafkaEventLog
from rewards.production.migrate import create_topic
from schemas.records import dump_records
from schemas.topics import partition_key
from tests.kafka_helpers import PARTITIONS, conversions, end_offsets, engine, eventually, read_since

PROJECT = "kafka-log-project"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    return engine("kafka", "KAFKA_BOOTSTRAP_SERVERS", start_kafka, tmp_path_factory)


@pytest.fixture(scope="module")
async def event_log(kafka):
    await create_topic(kafka.url, PARTITIONS, 1)
    event_log = await KafkaEventLog.start(kafka.url, 4)
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


async def test_publishes_waiting_together_share_one_transaction_all_or_none(kafka, monkeypatch):
    """With one producer, the publishes queued while a transaction is in flight go in the next one
    together: one failing send fails them all, and none of them is ever visible."""
    before = await end_offsets(kafka.url)
    event_log = await KafkaEventLog.start(kafka.url, 1)
    (slot,) = event_log._slots
    send = slot.producer.send

    async def poisoned_send(topic, payload, key):
        if b'"poison"' in payload:
            raise RuntimeError("this message cannot be sent")
        return await send(topic, payload, key=key)

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
