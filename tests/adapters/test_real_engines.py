"""Smoke tests on the real engines: Kafka transactions and a broker outage, faust, Redis Lua, ClickHouse's DDL."""

import asyncio
import logging
import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import faust
import pytest
import redis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from rewards.devengines import clickhouse, start_clickhouse
from schemas.clickhouse import INSERT_SETTINGS, statements
from tests.support.kafka_helpers import new_topic

# The real-engine fixtures (kafka_url, kafka_broker, redis_url, clickhouse_url), without touching conftest.py.


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


async def read_all(bootstrap: str, topic: str, isolation_level: str) -> list[bytes]:
    """Everything up to the end offset (for read_committed: the last stable offset), from the start."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation_level, enable_auto_commit=False)
    await consumer.start()
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        end = (await consumer.end_offsets([partition]))[partition]
        values = []
        async with asyncio.timeout(15):
            while await consumer.position(partition) < end:
                batches = await consumer.getmany(partition, timeout_ms=500)
                values += [record.value for record in batches.get(partition, [])]
        return values
    finally:
        await consumer.stop()


async def commit(producer: AIOKafkaProducer, topic: str, *values: bytes) -> None:
    async with producer.transaction():
        for value in values:
            await producer.send_and_wait(topic, value)


async def test_read_committed_consumer_sees_committed_transactions_only(kafka_url):
    topic = await new_topic(kafka_url, "smoke")
    producer = AIOKafkaProducer(bootstrap_servers=kafka_url, transactional_id=unique("tx"))
    await producer.start()
    try:
        await commit(producer, topic, b"committed-1", b"committed-2")
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"aborted")
        await producer.abort_transaction()
        await commit(producer, topic, b"committed-3")
    finally:
        await producer.stop()

    assert await read_all(kafka_url, topic, "read_committed") == [b"committed-1", b"committed-2", b"committed-3"]
    # The aborted record did reach the log: read_committed filtered it out.
    assert b"aborted" in await read_all(kafka_url, topic, "read_uncommitted")


async def test_a_stopped_broker_fails_sends_within_a_bound_and_works_again_after_restart(kafka_broker, caplog):
    caplog.set_level(logging.CRITICAL, logger="aiokafka")  # it logs each failed reconnect, ~10 a second per client
    url = kafka_broker.url
    topic = await new_topic(url, "smoke")
    transactional_id = unique("tx")
    plain = AIOKafkaProducer(bootstrap_servers=url, request_timeout_ms=2000)
    producer = AIOKafkaProducer(bootstrap_servers=url, transactional_id=transactional_id, request_timeout_ms=2000)
    await plain.start()
    await producer.start()
    await commit(producer, topic, b"before")

    await asyncio.to_thread(kafka_broker.stop)
    started = time.monotonic()
    with pytest.raises(KafkaError):
        await asyncio.wait_for(plain.send_and_wait(topic, b"lost"), 20)
    assert time.monotonic() - started < 10  # a non-idempotent producer gives up after request_timeout_ms
    # A transaction it retries for ever (even its abort waits for the broker): the caller's deadline bounds it.
    await producer.begin_transaction()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(2):
            await producer.send_and_wait(topic, b"in-doubt")

    await asyncio.to_thread(kafka_broker.start)
    await plain.send_and_wait(topic, b"plain-after")
    await asyncio.wait_for(producer.stop(), 15)
    # As a worker would: a new producer with the same transactional id fences the old one and aborts its transaction.
    producer = AIOKafkaProducer(bootstrap_servers=url, transactional_id=transactional_id)
    await producer.start()
    try:
        await commit(producer, topic, b"after")
    finally:
        await producer.stop()
        await plain.stop()

    assert await read_all(url, topic, "read_committed") == [b"before", b"plain-after", b"after"]


async def wait_until(condition, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.05)


async def test_faust_agent_consumes_records_from_the_broker(kafka_url, tmp_path):
    # Before the worker subscribes: a missing topic is ignored by its assignor.
    topic = await new_topic(kafka_url, "smoke")
    app = faust.App(
        unique("smoke-app"),
        broker=f"kafka://{kafka_url}",
        store="memory://",
        datadir=tmp_path,
        web_enabled=False,
        broker_session_timeout=2.0,  # the first assignment waits about half of it
        broker_heartbeat_interval=0.3,
        topic_partitions=1,
        topic_replication_factor=1,
    )
    seen: list[bytes] = []

    @app.agent(app.topic(topic, value_type=bytes, value_serializer="raw"))
    async def collect(stream):
        async for value in stream:
            seen.append(value)

    await app.start()
    try:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_url)
        await producer.start()
        try:
            for n in range(3):
                await producer.send_and_wait(topic, f"record-{n}".encode())
        finally:
            await producer.stop()
        await wait_until(lambda: len(seen) >= 3, 20)
    finally:
        await app.stop()
    assert seen == [b"record-0", b"record-1", b"record-2"]


MOVE = """
local amount = tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[1])) < amount then
  return redis.error_reply('insufficient balance')
end
redis.call('DECRBY', KEYS[1], amount)
return redis.call('INCRBY', KEYS[2], amount)
"""


def test_lua_script_changes_two_keys_atomically(redis_url):
    source, target = unique("smoke:source"), unique("smoke:target")
    with redis.Redis.from_url(redis_url) as client:
        client.mset({source: 10, target: 0})
        assert client.eval(MOVE, 2, source, target, 3) == 3
        with pytest.raises(redis.ResponseError, match="insufficient balance"):
            client.eval(MOVE, 2, source, target, 100)
        assert client.mget(source, target) == [b"7", b"3"]
        client.delete(source, target)


def payout(project: str, n: int, amount: str) -> dict:
    at = datetime(2026, 1, 1, 12, n, tzinfo=UTC)
    return {
        "project_id": project,
        "payout_id": f"p{n}",
        "source_id": f"e{n}",
        "source_type": "event",
        "kind": "conversion",
        "role": "end_user",
        "level": 0,
        "recipient_identifier": f"0x{n:040x}",
        "recipient_identifier_type": "evm_address",
        "amount": Decimal(amount),
        "currency": "point",
        "currency_chain_id": 0,
        "currency_name": "points",
        "currency_decimals": 0,
        "happened_at": at,
        "created_at": at,
    }


def insert_payouts(client, block: list[dict], token: str) -> None:
    settings = {**INSERT_SETTINGS, "insert_deduplication_token": token}
    rows = [list(row.values()) for row in block]
    client.insert("payouts", rows, column_names=list(block[0]), settings=settings)


def totals(client, project: str) -> tuple:
    """(points by project, points by user, payouts counted by user, raw payout rows), from the views' tables."""
    where = "WHERE project_id = {p:String}"
    row = client.query(
        f"SELECT (SELECT sum(amount) FROM point_totals_by_project {where}),"
        f" (SELECT sum(amount) FROM point_totals_by_user {where}),"
        f" (SELECT sum(payouts) FROM point_totals_by_user {where}),"
        f" (SELECT count() FROM payouts {where})",
        {"p": project},
    )
    return tuple(row.result_rows[0])


def fresh_database(url: str):
    database = unique("smoke")
    clickhouse.connect(url).command(f"CREATE DATABASE {database}")
    client = clickhouse.connect(url, database=database)
    for statement in statements():
        client.command(statement)
    return client


def test_materialized_views_count_a_redelivered_block_once(clickhouse_url):
    client = fresh_database(clickhouse_url)
    project = unique("project")
    block = [payout(project, 1, "1.5"), payout(project, 2, "2.5")]

    insert_payouts(client, block, token="delivery-1")
    insert_payouts(client, block, token="delivery-1")  # redelivered: same block, same token
    assert totals(client, project) == (Decimal("4"), Decimal("4"), 2, 2)

    insert_payouts(client, block, token="delivery-2")  # another delivery is counted: the token is what dedups
    assert totals(client, project) == (Decimal("8"), Decimal("8"), 4, 4)


def test_clickhouse_keeps_data_and_dedup_log_across_a_restart(tmp_path):
    engine = start_clickhouse(tmp_path)
    try:
        client = fresh_database(engine.url)
        database = client.database
        project = unique("project")
        block = [payout(project, 1, "5")]
        insert_payouts(client, block, token="before-restart")

        client.close_connections()  # idle keep-alive connections would hold the stop up to keep_alive_timeout (2 s)
        engine.restart()
        assert engine.exit_code == 0  # SIGTERM stopped it cleanly, no SIGKILL
        client = clickhouse.connect(engine.url, database=database)
        assert totals(client, project) == (Decimal("5"), Decimal("5"), 1, 1)
        insert_payouts(client, block, token="before-restart")  # the dedup log survived the restart too
        assert totals(client, project) == (Decimal("5"), Decimal("5"), 1, 1)
        client.close_connections()
    finally:
        engine.stop()
    assert engine.exit_code == 0
