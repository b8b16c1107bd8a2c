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
        await event_log.publish(PROJECT, records)

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
    await asyncio.gather(*(event_log.publish(f"{PROJECT}-{i}", conversions(PROJECT, f"c{i}", 2)) for i in range(40)))

    async def visible():
        assert len(await read_since(kafka.url, before, "read_committed")) == 40

    await eventually(visible, timeout_s=5, every_s=0.05)
