"""The worker's write of a delivery, on the embedded engines in-process: nothing is written twice, whatever the
state store forgot (the warehouse's `dedup_ids` and referrals refuse a second payout on their own)."""

import asyncio
import uuid

import pytest

from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import Delivery
from rewards.settings import Settings
from runtime.wiring import open_embedded
from schemas.records import CodeUseRecord, ConversionRecord, ReversalRecord
from stream_workers.handlers.base import Waiting
from stream_workers.processor import process_delivery
from tests.contract.support import redis_url  # noqa: F401 (a fixture)
from tests.query_api.test_payouts import CONFIG
from tests.schemas.test_migrations import server_place  # noqa: F401 (a fixture)


def conversion(project_id: str, dedup_id: str, received_ms: int = 1_790_000_000_000) -> ConversionRecord:
    return ConversionRecord(
        project_id=project_id, batch_id="b", dedup_id=dedup_id, name="signup", user_identifier="0x" + "a" * 40,
        user_identifier_type="evm_address", timestamp_ms=1_790_000_000_000, received_ms=received_ms,
    )  # fmt: skip


@pytest.fixture
async def backends(tmp_path):
    backends = await open_embedded(Settings(data_dir=tmp_path))
    yield backends
    await backends.close()


async def accepted(backends, project_id: str, *dedup_ids: str) -> None:
    users_and_names = [(User("0x" + "a" * 40, "evm_address"), "signup")] * len(dedup_ids)
    async with backends.state.ingest(project_id, list(dedup_ids), users_and_names, None):
        pass


async def total(backends, project_id: str) -> str:
    rows = await backends.warehouse.query(
        "SELECT toString(sum(amount)) AS t FROM point_totals_by_project WHERE project_id = {p:String}",
        {"p": project_id},
    )
    return rows[0]["t"]


async def test_a_record_published_twice_is_written_once(backends):
    project_id = await backends.state.create_project("p")
    await backends.state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    await accepted(backends, project_id, "d1")
    await process_delivery(Delivery("t1", [conversion(project_id, "d1"), conversion(project_id, "d1")]), backends.state,
                           backends.warehouse)  # fmt: skip
    assert await total(backends, project_id) == "10"  # signup: 5% of 100 + 5 campaign bonus, once
    await process_delivery(Delivery("t2", [conversion(project_id, "d1")]), backends.state, backends.warehouse)
    assert await total(backends, project_id) == "10"


async def test_a_delivery_seen_again_writes_nothing_twice(backends):
    project_id = await backends.state.create_project("p")
    await backends.state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    await accepted(backends, project_id, "d2")
    delivery = Delivery("t3", [conversion(project_id, "d2")])
    await process_delivery(delivery, backends.state, backends.warehouse)
    await process_delivery(delivery, backends.state, backends.warehouse)
    assert await total(backends, project_id) == "10"


# -- the warehouse refuses on its own ---------------------------------------------------------------------------


@pytest.fixture
async def redis_backends(tmp_path, redis_url):  # noqa: F811
    """The embedded warehouse with the production state store: Redis, whose keys a test can make it forget."""
    from rewards.adapters.production.redis_state import open_redis_state

    backends = await open_embedded(Settings(data_dir=tmp_path))
    await backends.state.close()
    backends.state = await open_redis_state(redis_url)
    yield backends
    await backends.close()


async def test_an_event_redis_forgot_is_not_paid_twice(redis_backends):
    backends, redis = redis_backends, redis_backends.state._redis
    project_id = await backends.state.create_project("p")
    await backends.state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    await accepted(backends, project_id, "lost-1")
    await process_delivery(Delivery("t-a", [conversion(project_id, "lost-1", now_ms())]), backends.state,
                           backends.warehouse)  # fmt: skip
    assert await total(backends, project_id) == "10"

    await redis.delete(ProjectKeys(project_id).dedup("lost-1"))  # Redis lost its last second
    await accepted(backends, project_id, "lost-1")  # the producer's retry is accepted again (no archive here)
    assert await backends.state.event_status(project_id, "lost-1") == "accepted"
    await process_delivery(Delivery("t-b", [conversion(project_id, "lost-1", now_ms())]), backends.state,
                           backends.warehouse)  # fmt: skip
    assert await total(backends, project_id) == "10"  # the warehouse knew it: not paid again
    assert await backends.state.event_status(project_id, "lost-1") == "processed"  # and the mark is repaired


class FailingOnce:
    """A warehouse whose insert into `table` fails once: a worker dying in the middle of a delivery."""

    def __init__(self, warehouse, table: str):
        self._warehouse, self._table, self.failed = warehouse, table, False

    async def insert(self, table: str, rows: list[dict], token: str) -> None:
        if table == self._table and not self.failed:
            self.failed = True
            raise ConnectionError("the worker died here")
        await self._warehouse.insert(table, rows, token)

    async def query(self, sql: str, params: dict | None = None) -> list[dict]:
        return await self._warehouse.query(sql, params)


async def test_a_delivery_cut_short_is_finished_once(backends):
    project_id = await backends.state.create_project("p")
    await backends.state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    await accepted(backends, project_id, "cut-1")
    delivery = Delivery("t-cut", [conversion(project_id, "cut-1", now_ms())])
    failing = FailingOnce(backends.warehouse, "payouts")  # the conversion is written, its payouts not
    with pytest.raises(ConnectionError):
        await process_delivery(delivery, backends.state, failing)
    await process_delivery(delivery, backends.state, failing)  # read again after the crash: the same token
    assert await total(backends, project_id) == "10"
    await process_delivery(Delivery("t-again", delivery.records), backends.state, backends.warehouse)
    assert await total(backends, project_id) == "10"


OWNER, ALICE, BOB = (User("0x" + c * 40, "evm_address") for c in "bcd")


def use(project_id: str, code: str, user: User, max_uses: int | None = 1, owner: User = OWNER) -> CodeUseRecord:
    return CodeUseRecord(
        project_id=project_id, use_id=uuid.uuid4().hex, code=code, owner_identifier=owner.identifier,
        owner_identifier_type=owner.identifier_type, user_identifier=user.identifier,
        user_identifier_type=user.identifier_type, used_at_ms=now_ms(), max_uses=max_uses,
    )  # fmt: skip


async def points_of(backends, project_id: str) -> dict[str, str]:
    rows = await backends.warehouse.query(
        "SELECT recipient_identifier AS user, toString(sum(amount)) AS points FROM payouts"
        " WHERE project_id = {p:String} GROUP BY user ORDER BY user",
        {"p": project_id},
    )
    return {row["user"]: row["points"] for row in rows}


async def dead_letters(backends, project_id: str) -> list[str]:
    rows = await backends.warehouse.query(
        "SELECT reason FROM dead_letters WHERE project_id = {p:String}", {"p": project_id}
    )
    return [row["reason"] for row in rows]


async def test_code_uses_are_paid_once_and_never_past_max_uses(backends):
    project_id = await backends.state.create_project("p")
    await backends.state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    first = use(project_id, "CODE1", ALICE)
    await process_delivery(Delivery("u-1", [first]), backends.state, backends.warehouse)
    paid = {OWNER.identifier: "50", ALICE.identifier: "10"}
    assert await points_of(backends, project_id) == paid

    await process_delivery(Delivery("u-2", [first]), backends.state, backends.warehouse)  # relayed again
    assert await points_of(backends, project_id) == paid and await dead_letters(backends, project_id) == []

    # Uses a state store that forgot `first` let through: past the code's max_uses, and of a user referred already.
    past_limit, referred_twice = use(project_id, "CODE1", BOB), use(project_id, "CODE2", ALICE, None)
    await process_delivery(Delivery("u-3", [past_limit, referred_twice]), backends.state, backends.warehouse)
    assert await points_of(backends, project_id) == paid
    reasons = sorted(await dead_letters(backends, project_id))
    assert len(reasons) == 2 and "max_uses (1)" in reasons[0] and "already referred" in reasons[1]
    count = "SELECT count() AS n FROM referrals WHERE project_id = {p:String}"
    assert (await backends.warehouse.query(count, {"p": project_id}))[0]["n"] in (1, "1")


async def test_uses_of_one_delivery_count_against_each_other(backends):
    project_id = await backends.state.create_project("p")
    await backends.state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    uses = [use(project_id, "CODE3", ALICE, 1), use(project_id, "CODE3", BOB, 1)]
    delivery = Delivery("u-4", uses)
    failing = FailingOnce(backends.warehouse, "payouts")  # its referrals are written, the rest not
    with pytest.raises(ConnectionError):
        await process_delivery(delivery, backends.state, failing)
    await process_delivery(delivery, backends.state, failing)  # its own referrals do not count against it
    assert await points_of(backends, project_id) == {OWNER.identifier: "50", ALICE.identifier: "10"}
    assert len(await dead_letters(backends, project_id)) == 1


@pytest.fixture(params=["chdb", "clickhouse"])
async def warehouses(request, tmp_path):
    """The embedded backends, their warehouse in-process (chdb) or a database of its own on a ClickHouse server."""
    backends = await open_embedded(Settings(data_dir=tmp_path))
    if request.param == "clickhouse":
        await backends.warehouse.close()
        backends.warehouse = await request.getfixturevalue("server_place").open()
        await backends.warehouse.migrate()
    yield backends
    await backends.close()


async def test_a_full_delivery_with_the_longest_ids_is_written_once(warehouses):
    """A delivery of REWARDS_WORKER_BATCH_SIZE records, dedup ids as long as the edge takes, thousands of code uses:
    each list the worker asks the warehouse about goes in chunks (a ClickHouse server refuses any query parameter
    over 128 KiB, and the delivery was retried forever), and a delivery cut short finds its own referrals still."""
    backends = warehouses
    project_id = await backends.state.create_project("p")
    await backends.state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    n_uses = 4000
    ids = [f"{i:06d}".ljust(255, "x") for i in range(Settings().worker_batch_size - n_uses)]
    await accepted(backends, project_id, *ids)
    users = [User("0x" + f"{i:040x}", "evm_address") for i in range(n_uses)]
    owners = [User(f"owner-{i:05d}@".ljust(250, "o") + ".example.com", "email") for i in range(n_uses)]
    records = [conversion(project_id, d, now_ms()) for d in ids] + [
        use(project_id, f"C{i}", u, 1, owner) for i, (u, owner) in enumerate(zip(users, owners, strict=True))
    ]  # each code of its own owner, as long an email as the edge takes
    failing = FailingOnce(backends.warehouse, "payouts")  # the conversions and referrals are written, the rest not
    with pytest.raises(ConnectionError):
        await process_delivery(Delivery("t-full", records), backends.state, failing)
    await process_delivery(Delivery("t-full", records), backends.state, failing)

    assert await total(backends, project_id) == str(len(ids) * 10 + n_uses * 60)  # signups 10, code uses 50 + 10
    assert await dead_letters(backends, project_id) == []
    count = "SELECT count() AS n, uniqExact(dedup_id) AS u FROM conversions WHERE project_id = {p:String}"
    assert [int(v) for v in (await backends.warehouse.query(count, {"p": project_id}))[0].values()] == [len(ids)] * 2


# -- a reversal before its event (a project's conversions spread by user over partitions: schemas.topics) -------------


def reversal(project_id: str, dedup_id: str) -> ReversalRecord:
    return ReversalRecord(project_id=project_id, id=f"r-{dedup_id}", dedup_id=dedup_id, reason="refund", fraction="1",
                          reversed_before="0", reversed_after="1", reversed_at_ms=now_ms())  # fmt: skip


async def test_a_reversal_of_an_event_accepted_not_yet_written_waits_for_it_and_then_takes_it_back(backends):
    project_id = await backends.state.create_project("p")
    await backends.state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    await accepted(backends, project_id, "d1")
    delivery = Delivery("reversals", [reversal(project_id, "d1")])
    with pytest.raises(Waiting, match="d1"):
        await process_delivery(delivery, backends.state, backends.warehouse)
    assert await dead_letters(backends, project_id) == []  # waiting, never set aside
    await process_delivery(Delivery("events", [conversion(project_id, "d1")]), backends.state, backends.warehouse)
    assert await total(backends, project_id) == "10"
    await process_delivery(delivery, backends.state, backends.warehouse)  # tried again: now it is written
    assert await total(backends, project_id) == "0"
    assert await dead_letters(backends, project_id) == []


async def test_a_reversal_of_an_event_never_accepted_is_set_aside_not_waited_for(backends):
    project_id = await backends.state.create_project("p")
    await backends.state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    await process_delivery(Delivery("reversals", [reversal(project_id, "ghost")]), backends.state, backends.warehouse)
    (reason,) = await dead_letters(backends, project_id)
    assert "ghost was never written" in reason


# -- async inserts (REWARDS_CLICKHOUSE_ASYNC_INSERT_MS): the server gathers concurrent deliveries' inserts -------


@pytest.fixture
async def async_backends(tmp_path, server_place):  # noqa: F811
    from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse

    backends = await open_embedded(Settings(data_dir=tmp_path))
    await backends.warehouse.close()
    backends.warehouse = await ClickHouseWarehouse.connect(server_place.url, async_insert_ms=50)
    await backends.warehouse.migrate()
    yield backends
    await backends.close()


async def test_async_inserts_of_deliveries_at_once_cut_short_or_seen_again_write_each_once(async_backends):
    """Deliveries written at the same time (their inserts gathered into one by the server), one cut short after its
    conversions and read again, one seen again whole: every payout once, in the table and in its views."""
    backends = async_backends
    project_id = await backends.state.create_project("p")
    await backends.state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    ids = [f"async-{n}" for n in range(6)]
    await accepted(backends, project_id, *ids)
    deliveries = [Delivery(f"t-async-{n}", [conversion(project_id, d, now_ms())]) for n, d in enumerate(ids)]
    failing = FailingOnce(backends.warehouse, "payouts")
    first = [process_delivery(d, backends.state, backends.warehouse) for d in deliveries[1:]]
    results = await asyncio.gather(process_delivery(deliveries[0], backends.state, failing), *first,
                                   return_exceptions=True)  # fmt: skip
    assert isinstance(results[0], ConnectionError) and not any(isinstance(r, BaseException) for r in results[1:])
    await asyncio.gather(*(process_delivery(d, backends.state, backends.warehouse) for d in deliveries))
    assert await total(backends, project_id) == "60"  # 10 per event (5% of 100 + 5 campaign bonus), once each
    assert await points_of(backends, project_id) == {"0x" + "a" * 40: "60"}
