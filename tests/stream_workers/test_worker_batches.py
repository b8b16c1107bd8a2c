"""Deliveries cut from a partition's messages, and the plans that keep their boundaries across crashes."""

import uuid

import pytest

from rewards.adapters.embedded.sqlite_plans import SqlitePlans
from rewards.adapters.warehouse_plans import WarehousePlans
from rewards.domain.timestamps import now_ms
from schemas.clickhouse.values import ch_datetime
from schemas.records import dump_records
from stream_workers.batches import Message, Planner
from tests.support.kafka_helpers import conversions

TOPIC = "rewards.events"


def messages(partition: int, offsets: list[int], records_each: int = 10) -> list[Message]:
    # Offsets step by two, as on a transactional topic: each message is followed by its commit marker.
    return [
        Message(TOPIC, partition, offset, dump_records(conversions("p", f"b{offset}", records_each)))
        for offset in offsets
    ]


@pytest.fixture
async def plans(tmp_path):
    plans = SqlitePlans(tmp_path / "plans.sqlite3")
    yield plans
    await plans.close()


async def drain(planner: Planner) -> list[str]:
    tokens = []
    while (batch := await planner.next_batch()) is not None:
        tokens.append(batch.delivery.token)
        planner.done(batch)
    return tokens


async def test_new_deliveries_hold_at_most_max_records_and_at_least_one_message(plans):
    planner = Planner(plans, max_records=25)
    planner.add(messages(0, [0, 2, 4, 6, 8]))
    planner.add(messages(1, [0], records_each=40))
    assert await drain(planner) == [f"{TOPIC}:0:0-2", f"{TOPIC}:0:4-6", f"{TOPIC}:0:8-8", f"{TOPIC}:1:0-0"]


async def test_each_partition_gives_its_own_deliveries_and_counts_what_came(plans):
    planner = Planner(plans, max_records=100)
    for partition in range(3):
        planner.add(messages(partition, [0, 2]))
    assert sorted(planner.partitions()) == [(TOPIC, p) for p in range(3)]
    batch = await planner.batch_of((TOPIC, 1))
    assert batch.delivery.token == f"{TOPIC}:1:0-2" and planner.queued((TOPIC, 1)) == 2
    assert await planner.batch_of((TOPIC, 1)) == batch  # not done yet: the same plan
    planner.done(batch)
    assert await planner.batch_of((TOPIC, 1)) is None and planner.queued((TOPIC, 1)) == 0
    assert sorted(planner.partitions()) == [(TOPIC, 0), (TOPIC, 2)]
    before = planner.added((TOPIC, 1))
    planner.add(messages(1, [4]))
    assert planner.added((TOPIC, 1)) == before + 1  # a lane that found nothing meanwhile looks again


async def test_a_delivery_read_again_follows_its_recorded_plan(plans):
    first = Planner(plans, max_records=100)
    first.add(messages(0, [0, 2, 4, 6]))
    batch = await first.next_batch()
    assert (batch.delivery.token, len(batch.delivery.records)) == (f"{TOPIC}:0:0-6", 40)
    # The worker dies after writing, before committing. Its successor reads the same messages in other batches:
    second = Planner(plans, max_records=100)
    second.add(messages(0, [0, 2]))
    assert await second.next_batch() is None  # waits for the rest of the recorded delivery
    second.add(messages(0, [4, 6, 8]))
    batch = await second.next_batch()
    assert (batch.delivery.token, len(batch.delivery.records)) == (f"{TOPIC}:0:0-6", 40)
    second.done(batch)
    assert [b.delivery.token for b in [await second.next_batch()]] == [f"{TOPIC}:0:8-8"]


async def test_a_partition_read_again_from_an_earlier_offset_starts_over(plans):
    planner = Planner(plans, max_records=20)
    planner.add(messages(0, [0, 2, 4]))
    planner.add(messages(0, [2, 4]))  # a rebalance rewound the partition to its committed offset
    assert await drain(planner) == [f"{TOPIC}:0:2-4"]


async def test_partitions_moved_away_are_forgotten(plans):
    planner = Planner(plans, max_records=20)
    planner.add(messages(0, [0]) + messages(1, [0]))
    planner.keep_only({(TOPIC, 1)})
    assert await drain(planner) == [f"{TOPIC}:1:0-0"]


async def test_sqlite_plans_keep_the_first_end_recorded(tmp_path):
    plans, again = SqlitePlans(tmp_path / "p.sqlite3"), SqlitePlans(tmp_path / "p.sqlite3")
    try:
        assert await plans.claim("t:0:10", 20) == (20, True)
        assert await again.claim("t:0:10", 14) == (20, False)  # another process sharing the file
    finally:
        await plans.close()
        await again.close()


@pytest.fixture(params=["chdb", "clickhouse"])
async def plan_warehouse(request, tmp_path):
    if request.param == "chdb":
        from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse

        warehouse = ChdbWarehouse(tmp_path / "warehouse")
    else:
        from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse

        warehouse = await ClickHouseWarehouse.connect(request.getfixturevalue("clickhouse_url"))
    await warehouse.migrate()
    yield warehouse
    await warehouse.close()


async def test_warehouse_plans_keep_the_first_end_recorded(plan_warehouse):
    plans, again = WarehousePlans(plan_warehouse), WarehousePlans(plan_warehouse)
    key = f"t:0:{uuid.uuid4().hex}"
    assert await plans.claim(key, 20) == (20, True)
    assert await again.claim(key, 14) == (20, False)  # another worker, after a rebalance
    await plan_warehouse.insert("worker_plans", [{"plan_key": key, "last_offset": 9, "created_at": ch_datetime(
        now_ms() + 1000)}], "past-the-deduplication-window")  # fmt: skip
    assert await plans.claim(key, 30) == (20, False)  # the earliest still wins
