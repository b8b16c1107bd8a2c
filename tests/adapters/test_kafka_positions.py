"""KafkaPositions on a real broker: where a group resumes a partition, and the first record the workers can see from an
offset (transaction markers and aborted records skipped): what the pipeline checks a partition's queue against after a
rebalance (stream_workers.faust_app, Pipeline._resumes)."""

import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from rewards.adapters.production.kafka_positions import KafkaPositions
from tests.support.kafka_helpers import new_topic


async def _publish(url: str, topic: str, values: list[tuple[bytes, bool]]) -> list[int]:
    """Each value in a transaction of its own, committed or aborted; the offsets they took."""
    producer = AIOKafkaProducer(bootstrap_servers=url, transactional_id=f"positions-{uuid.uuid4().hex}")
    await producer.start()
    offsets = []
    try:
        for value, commit in values:
            await producer.begin_transaction()
            offsets.append((await (await producer.send(topic, value, partition=0))).offset)
            await (producer.commit_transaction() if commit else producer.abort_transaction())
    finally:
        await producer.stop()
    return offsets


async def _commit(url: str, group: str, topic: str, offset: int) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=url, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        await consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(offset, "")})
    finally:
        await consumer.stop()


async def test_the_first_record_skips_markers_and_aborted_records_and_the_resume_point_follows_commits(kafka_url):
    topic, group = await new_topic(kafka_url, "positions"), f"group-{uuid.uuid4().hex[:8]}"
    first, aborted, third = await _publish(kafka_url, topic, [(b"a", True), (b"b", False), (b"c", True)])
    positions = await KafkaPositions.start(kafka_url, group, topic)
    try:
        assert await positions.resume_point(0) == 0  # never committed: the partition's first offset
        assert await positions.first_record(0, 0) == first
        # After the first record: its marker, the aborted record and its marker are skipped.
        assert aborted > first and await positions.first_record(0, first + 1) == third
        assert await positions.first_record(0, third + 1) is None  # only the last marker left
        await _commit(kafka_url, group, topic, first + 1)
        assert await positions.resume_point(0) == first + 1
    finally:
        await positions.close()
