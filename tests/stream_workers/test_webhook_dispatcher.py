"""The webhook dispatcher's reader on the embedded engines (SQLite, chdb): one project whose events cannot be made
(a record the events cannot read) is retried, then skipped while the engines answer, and the other projects'
deliveries are enqueued all the same; an engine that does not answer skips nothing."""

import pytest

from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from rewards.adapters.embedded.sqlite_db import SqliteDatabase
from rewards.adapters.embedded.sqlite_state import SqliteStateStore
from rewards.adapters.webhook_sender import GuardedSender
from rewards.domain.webhooks import Endpoint
from schemas.records import AffiliateRecord
from stream_workers.webhooks import dispatcher as dispatching
from stream_workers.webhooks.dispatcher import Dispatcher


class NoFeed:
    async def poll(self, max_deliveries, timeout_s):
        return []

    async def commit(self, deliveries):
        pass


@pytest.fixture(scope="module")
async def engines(tmp_path_factory):
    root = tmp_path_factory.mktemp("dispatcher")
    state, warehouse = SqliteStateStore(SqliteDatabase(root / "state.sqlite3")), ChdbWarehouse(root / "warehouse")
    yield state, warehouse
    await state.close()
    await warehouse.close()


def registered(project_id: str, n: int) -> AffiliateRecord:
    return AffiliateRecord(project_id=project_id, id=f"aff-{n}", user_identifier=f"0x{n:040x}",
                           user_identifier_type="evm_address", name=None, status="active", region=None, audience=None,
                           tax_status="missing", tier=None, created_at_ms=2_000_000_000_000)  # fmt: skip


async def test_one_projects_failure_is_skipped_after_retries_and_the_others_go_on(engines, monkeypatch):
    state, warehouse = engines
    for project in ("good", "bad"):
        endpoint = Endpoint(f"wh_{project}", "https://93.184.216.34/h", ("affiliate.registered",), None, True,
                            "plain:whsec_eA==", 1_000)  # fmt: skip
        await state.create_webhook(project, endpoint)
    dispatcher = Dispatcher(NoFeed(), state, warehouse, GuardedSender(False))
    made = dispatcher.events.deliveries

    async def failing_for_bad(project_id, records, endpoints, now):
        if project_id == "bad":
            raise ValueError("a record the events cannot read")
        return await made(project_id, records, endpoints, now)

    monkeypatch.setattr(dispatcher.events, "deliveries", failing_for_bad)
    records = [registered("bad", 1), registered("good", 2)]
    with pytest.raises(ValueError):  # first tries: raised, the records read again
        await dispatcher.enqueue(records)
    assert await dispatcher.enqueue(records, skip_failing=True) == 1  # then the bad one skipped, the good one sent
    assert [d.endpoint_id for d in (await state.list_deliveries("good", "wh_good", 0, 10))[0]] == ["wh_good"]

    monkeypatch.setattr(dispatcher, "_engines_answer", lambda: _false())
    with pytest.raises(ValueError):  # an engine down: nothing skipped
        await dispatcher.enqueue(records, skip_failing=True)
    assert dispatching.MAX_TRIES >= 2


async def _false() -> bool:
    return False


async def test_a_delivery_of_ten_thousand_events_is_read_in_queries_the_server_takes(clickhouse_url):
    """A ClickHouse server refuses a parameter past 128 KiB: a big delivery's ids go in chunks (bench/webhooks.py
    found one read failing, and retried for ever)."""
    from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse
    from schemas.records import ConversionRecord, PayoutDecisionRecord, ReversalRecord
    from stream_workers.webhooks.events import Events

    warehouse = await ClickHouseWarehouse.connect(clickhouse_url)
    await warehouse.migrate()
    user = {"user_identifier": "0x" + "1" * 40, "user_identifier_type": "evm_address"}
    conversions = [ConversionRecord(project_id="big", batch_id="b", dedup_id=f"{n:0>40}", name="purchase", **user,
                                    timestamp_ms=1_700_000_000_000 + n, received_ms=1_700_000_000_000)
                   for n in range(10_000)]  # fmt: skip
    reversals = [ReversalRecord(project_id="big", id=f"r{n:0>40}", dedup_id=f"{n:0>40}", reason="refund",
                                fraction="1", reversed_before="0", reversed_after="1", reversed_at_ms=1)
                 for n in range(5_000)]  # fmt: skip
    decisions = [PayoutDecisionRecord(project_id="big", id=f"d{n}", payout_id=f"conversion:{n:0>40}:0",
                                      decision="approved", reason=None, decided_at_ms=1, payout={})
                 for n in range(5_000)]  # fmt: skip
    try:
        every = {"reward.earned", "reward.reversed", "payout.pending_approval"}
        assert await Events(warehouse).of("big", [*conversions, *reversals, *decisions], every) == []
    finally:
        await warehouse.close()
