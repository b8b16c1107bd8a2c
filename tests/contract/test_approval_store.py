"""The ApprovalStore contract (API.md §9): payouts held until decided, each decided exactly once (all of a request or
none, concurrent deciders: one wins), never held again once decided. On SQLite and Redis, and with `-m cluster` on a
Redis Cluster."""

import asyncio

import pytest

from rewards.domain.approvals import APPROVED, REJECTED, NotPending
from rewards.ports import ApprovalStore
from schemas.records import load_records
from tests.contract.support import Boom, assert_implements


def test_has_the_port(store: ApprovalStore):
    assert_implements(type(store), ApprovalStore)


def row(n: int) -> dict:
    return {"project_id": "p", "payout_id": f"conversion:e-{n}:0", "amount": str(10 * n), "status": "pending",
            "version": 1}  # fmt: skip


async def decide(store: ApprovalStore, pid: str, ids: list[str], decision: str = APPROVED) -> tuple[int, list]:
    async with store.decide_payouts(pid, ids, decision, "checked", 1_700_000_000_000) as change:
        return change.value, [] if change.payload is None else load_records(change.payload)


async def test_held_payouts_are_decided_once_all_or_none(store: ApprovalStore, pid: str, other_pid: str):
    await store.hold_payouts(pid, [row(1), row(2), row(3)])
    await store.hold_payouts(pid, [{**row(1), "amount": "999"}])  # held already: left as it is
    with pytest.raises(NotPending) as missing:
        await decide(store, pid, [row(1)["payout_id"], "conversion:nope:0"])
    assert missing.value.payout_id == "conversion:nope:0"
    count, records = await decide(store, pid, [row(1)["payout_id"], row(2)["payout_id"]])  # nothing was taken above
    assert count == 2 and [(r.payout_id, r.decision, r.reason, r.payout["amount"]) for r in records] == [
        ("conversion:e-1:0", APPROVED, "checked", "10"), ("conversion:e-2:0", APPROVED, "checked", "20")]  # fmt: skip
    with pytest.raises(NotPending):
        await decide(store, pid, [row(2)["payout_id"]], REJECTED)  # decided already
    await store.hold_payouts(pid, [row(2)])  # a delivery processed again: a decided payout is never held again
    with pytest.raises(NotPending):
        await decide(store, pid, [row(2)["payout_id"]])
    with pytest.raises(NotPending):
        await decide(store, other_pid, [row(3)["payout_id"]])  # nothing crosses projects
    assert (await decide(store, pid, [row(3)["payout_id"]], REJECTED))[0] == 1


async def test_a_failed_publish_holds_them_again(store: ApprovalStore, pid: str):
    await store.hold_payouts(pid, [row(1)])
    with pytest.raises(Boom):
        async with store.decide_payouts(pid, [row(1)["payout_id"]], APPROVED, None, 1):
            raise Boom
    assert (await decide(store, pid, [row(1)["payout_id"]]))[0] == 1


async def test_concurrent_deciders_one_wins(store: ApprovalStore, pid: str):
    await store.hold_payouts(pid, [row(1)])

    async def one(decision: str):
        try:
            return (await decide(store, pid, [row(1)["payout_id"]], decision))[0]
        except NotPending:
            return 0

    assert sorted(await asyncio.gather(*(one(APPROVED if n % 2 else REJECTED) for n in range(6)))) == [0] * 5 + [1]
