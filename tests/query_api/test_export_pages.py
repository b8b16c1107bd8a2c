"""query_api/exports/service.py's keyset paging on the embedded engine, with pages of 3 rows: every row once, in order,
where rows share an event time and where a cap split one payout into a paid and a rejected row (the same id); another
project's rows never; a window's bounds as told (from inclusive, to exclusive)."""

import pytest

from query_api.exports import service
from rewards.adapters import migrations
from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from schemas.clickhouse.values import ch_datetime

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
async def warehouse(tmp_path_factory):
    warehouse = ChdbWarehouse(tmp_path_factory.mktemp("exports") / "warehouse")
    await migrations.migrate(warehouse)
    yield warehouse
    await warehouse.close()


def payout(project: str, payout_id: str, at_ms: int, amount: str = "1", **extra) -> dict:
    return {"project_id": project, "payout_id": payout_id, "source_id": payout_id.split(":")[0],
            "kind": "end_user_reward", "recipient_identifier": "u", "recipient_identifier_type": "email",
            "amount": amount, "currency": "point", "happened_at": ch_datetime(at_ms),
            "created_at": ch_datetime(at_ms + 5), **extra}  # fmt: skip


@pytest.fixture(scope="module")
async def written(warehouse) -> None:
    # Seven paid payouts, three at one time; two of them also have a rejected part; one of another project between.
    times = [T0, T0, T0, T0 + 1, T0 + 2, T0 + 2, T0 + 3]
    paid = [payout("p", f"e{n}:0", at) for n, at in enumerate(times)]
    paid.append(payout("other", "e9:0", T0 + 1))
    rejected = [payout("p", "e1:0", T0, "0.5", reason="cap"), payout("p", "e4:0", T0 + 2, "2", reason="budget")]
    await warehouse.insert("payouts", paid, "t:payouts")
    await warehouse.insert("rejected_payouts", rejected, "t:rejected")
    conversions = [{"project_id": "p", "dedup_id": f"c{n}", "name": "purchase", "user_identifier": "u",
                    "user_identifier_type": "email", "timestamp": ch_datetime(at), "received_at": ch_datetime(at),
                    "batch_id": "b", "args": "{}", "metadata": "{}"} for n, at in enumerate(times)]  # fmt: skip
    conversions.append({**conversions[0], "project_id": "other", "dedup_id": "c9"})
    await warehouse.insert("conversions", conversions, "t:conversions")


async def pages_of(iterator) -> list[list[dict]]:
    return [page async for page in iterator]


async def test_payout_pages_hold_every_row_once_in_order(warehouse, written, monkeypatch):
    monkeypatch.setattr(service, "PAGE_ROWS", 3)
    pages = await pages_of(service.payout_pages(warehouse, "p", service.Window()))
    assert [len(page) for page in pages] == [3, 3, 3]
    rows = [(r["id"], r["event_time"] - T0, r["status"], str(r["amount"])) for page in pages for r in page]
    assert rows == [
        ("e0:0", 0, "paid", "1"), ("e1:0", 0, "paid", "1"), ("e1:0:rejected", 0, "rejected", "0.5"),
        ("e2:0", 0, "paid", "1"), ("e3:0", 1, "paid", "1"), ("e4:0", 2, "paid", "1"),
        ("e4:0:rejected", 2, "rejected", "2"), ("e5:0", 2, "paid", "1"), ("e6:0", 3, "paid", "1"),
    ]  # fmt: skip


async def test_a_window_is_from_inclusive_to_exclusive(warehouse, written, monkeypatch):
    monkeypatch.setattr(service, "PAGE_ROWS", 2)
    pages = await pages_of(service.payout_pages(warehouse, "p", service.Window(T0 + 1, T0 + 3)))
    assert [r["id"] for page in pages for r in page] == ["e3:0", "e4:0", "e4:0:rejected", "e5:0"]
    assert await service.count(warehouse, "p", service.Window(T0 + 1, T0 + 3), "payouts") == 4


async def test_conversion_pages_hold_every_row_once_in_order(warehouse, written, monkeypatch):
    monkeypatch.setattr(service, "PAGE_ROWS", 3)
    pages = await pages_of(service.conversion_pages(warehouse, "p", service.Window()))
    assert [[r["dedup_id"] for r in page] for page in pages] == [["c0", "c1", "c2"], ["c3", "c4", "c5"], ["c6"]]
    assert await service.count(warehouse, "p", service.Window(None, T0 + 1), "conversions") == 3
