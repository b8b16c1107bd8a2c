"""The worker's write of a delivery, on the embedded engines in-process: nothing is written twice."""

import pytest

from rewards.backends import open_embedded
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.payouts import User
from rewards.ports import Delivery
from rewards.settings import Settings
from schemas.records import ConversionRecord
from stream_workers.processor import process_delivery
from tests.test_payouts import CONFIG


def conversion(project_id: str, dedup_id: str) -> ConversionRecord:
    return ConversionRecord(
        project_id=project_id, batch_id="b", dedup_id=dedup_id, name="signup", user_identifier="0x" + "a" * 40,
        user_identifier_type="evm_address", timestamp_ms=1_790_000_000_000, received_ms=1_790_000_000_000,
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
