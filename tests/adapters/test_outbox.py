"""The embedded outbox: several published batches make one delivery, the same one until committed."""

from rewards.adapters.embedded.sqlite_db import SqliteDatabase
from rewards.adapters.embedded.sqlite_outbox import SqliteOutbox
from schemas.records import dump_records
from tests.support.kafka_helpers import conversions

PROJECT = "outbox-project"


async def publish(outbox: SqliteOutbox, *batches: str) -> None:
    for batch in batches:
        await outbox.publish(PROJECT, dump_records(conversions(PROJECT, batch, 2)))


def batch_ids(delivery) -> list[str]:
    return list(dict.fromkeys(record.batch_id for record in delivery.records))


async def test_a_delivery_stays_the_same_until_committed_even_across_a_restart(tmp_path):
    outbox = SqliteOutbox(SqliteDatabase(tmp_path / "state.db"))
    await publish(outbox, "a", "b", "c")
    [first] = await outbox.poll(2, 0.01)
    assert batch_ids(first) == ["a", "b"] and len(first.records) == 4

    await publish(outbox, "d")
    restarted = SqliteOutbox(SqliteDatabase(tmp_path / "state.db"))  # as after a crash before the commit
    [again] = await restarted.poll(10, 0.01)
    assert (again.token, again.records) == (first.token, first.records)

    await restarted.commit([again])
    [rest] = await restarted.poll(10, 0.01)
    assert batch_ids(rest) == ["c", "d"] and rest.token != first.token
    await restarted.commit([rest])
    assert await restarted.poll(10, 0.01) == []
