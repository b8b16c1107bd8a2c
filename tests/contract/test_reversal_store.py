"""The ReversalStore contract (API.md §9): an event's reversals settled all or none, a repeat applied once, shares
never past 1, at most 1,000 reversals per event, concurrent requests never both taking the same share, and the share
written as the workers mark it. On SQLite and Redis, and with `-m cluster` on a Redis Cluster."""

import asyncio
from decimal import Decimal

import pytest

from rewards.domain import claim_checks as cc
from rewards.domain.reversals import Owed, PastWhole, Reversal, TakeBack, TooMany
from rewards.ports import ReversalStore
from schemas.records import load_records
from tests.contract.support import Boom, assert_implements, check, user

D = Decimal


def test_has_the_port(store: ReversalStore):
    assert_implements(type(store), ReversalStore)


async def reverse(store: ReversalStore, pid: str, *reversals: Reversal) -> tuple[int, list]:
    async with store.reverse(pid, list(reversals), 1_700_000_000_000) as change:
        return change.value, [] if change.payload is None else load_records(change.payload)


async def test_reversals_settle_in_order_and_a_repeat_counts_once(store: ReversalStore, pid: str, other_pid: str):
    count, records = await reverse(store, pid, Reversal("e-1", "refund", D("0.25")), Reversal("e-2", "x", D(1)))
    assert count == 2
    assert [(r.dedup_id, r.fraction, r.reversed_before, r.reversed_after) for r in records] == [
        ("e-1", "0.25", "0", "0.25"), ("e-2", "1", "0", "1")]  # fmt: skip
    assert all(r.project_id == pid and r.reversed_at_ms == 1_700_000_000_000 and len(r.id) == 32 for r in records)
    # the same reversal again counts 0 (0.25 and 0.250 alike); another reason is another reversal
    assert await reverse(store, pid, Reversal("e-1", "refund", D("0.250"))) == (0, [])
    count, [record] = await reverse(store, pid, Reversal("e-1", "chargeback", D("0.5")))
    assert (count, record.reversed_before, record.reversed_after) == (1, "0.25", "0.75")
    # nothing crosses projects
    _, [other] = await reverse(store, other_pid, Reversal("e-1", "refund", D("0.25")))
    assert (other.reversed_before, other.reversed_after) == ("0", "0.25")


async def test_past_the_whole_nothing_is_applied(store: ReversalStore, pid: str):
    await reverse(store, pid, Reversal("e-1", "refund", D("0.6")))
    with pytest.raises(PastWhole) as past:
        await reverse(store, pid, Reversal("e-2", "refund", D("0.5")), Reversal("e-1", "more", D("0.4000001")))
    assert past.value.dedup_id == "e-1"
    _, [record] = await reverse(store, pid, Reversal("e-2", "refund", D("0.5")))  # e-2 was not applied
    assert record.reversed_before == "0"
    _, [last] = await reverse(store, pid, Reversal("e-1", "more", D("0.4")))
    assert last.reversed_after == "1"


async def test_an_event_has_at_most_1000_reversals(store: ReversalStore, pid: str):
    for start in range(0, 1000, 100):
        items = [Reversal("e-1", f"part {n}", D("0.000001")) for n in range(start, start + 100)]
        assert (await reverse(store, pid, *items))[0] == 100
    with pytest.raises(TooMany):
        await reverse(store, pid, Reversal("e-1", "one more", D("0.000001")))


async def test_a_failed_publish_undoes_the_reversals(store: ReversalStore, pid: str):
    with pytest.raises(Boom):
        async with store.reverse(pid, [Reversal("e-1", "refund", D("0.5"))], 1):
            raise Boom
    _, [record] = await reverse(store, pid, Reversal("e-1", "refund", D("0.5")))  # applied now, from 0
    assert (record.reversed_before, record.reversed_after) == ("0", "0.5")


async def test_concurrent_requests_never_take_the_same_share(store: ReversalStore, pid: str):
    async def one(n: int):
        try:
            return await reverse(store, pid, Reversal("e-1", f"r{n}", D("0.3")))
        except PastWhole:
            return None

    results = [r for r in await asyncio.gather(*(one(n) for n in range(8))) if r is not None]
    steps = sorted((r[1][0].reversed_before, r[1][0].reversed_after) for r in results)
    assert steps == [("0", "0.3"), ("0.3", "0.6"), ("0.6", "0.9")]


async def test_the_share_written_only_grows(store: ReversalStore, pid: str):
    await reverse(store, pid, Reversal("e-1", "refund", D("0.5")), Reversal("e-1", "rest", D("0.5")))
    assert await store.reversed_shares(pid, ["e-1"]) == {}
    await store.mark_reversed(pid, {"e-1": D("0.5")})
    assert await store.reversed_shares(pid, ["e-1", "e-2"]) == {"e-1": D("0.5")}
    await store.mark_reversed(pid, {"e-1": D(1)})
    await store.mark_reversed(pid, {"e-1": D("0.5")})  # a late mark of an earlier reversal
    assert await store.reversed_shares(pid, ["e-1"]) == {"e-1": D(1)}


async def test_token_payouts_come_out_of_open_checks_and_the_rest_is_owed_once(store, pid: str, other_pid: str):
    bob = user(2)
    usdc = check(pid, 1, bob).currency.address.lower()
    opened, closed = check(pid, 1, bob), check(pid, 2, bob)
    await store.register_claim_checks(pid, [opened, closed])
    async with store.update_claim_checks(pid, [closed.id], cc.close, bob):
        pass
    items = [TakeBack(opened.id, bob, usdc, 400_000), TakeBack(opened.id, bob, usdc, 700_000),
             TakeBack(closed.id, bob, usdc, 5)]  # fmt: skip
    checks, added = await store.take_back(pid, "d1:take_back", items)
    assert [(c.id, c.amount, c.version) for c in checks] == [(opened.id, 0, 2)] and added == [0, 100_000, 5]
    assert (await store.get_claim_checks(pid, [opened.id]))[0].amount == 0
    assert await store.take_back(pid, "d1:take_back", items) == (checks, added)  # the same call: the same answer
    assert await store.settle_debts(other_pid, "d2:settle", [Owed(bob, usdc, 60_000)]) == [0]  # nothing crosses
    # the next checks settle the debt first: 100,005 owed
    assert await store.settle_debts(pid, "d2:settle", [Owed(bob, usdc, 60_000), Owed(bob, usdc, 60_000)]) == [
        60_000, 40_005]  # fmt: skip
    assert await store.settle_debts(pid, "d2:settle", [Owed(bob, usdc, 1)]) == [60_000, 40_005]  # kept
    assert await store.settle_debts(pid, "d3:settle", [Owed(bob, usdc, 60_000)]) == [0]


async def test_concurrent_take_backs_and_closes_of_one_check_never_lose_a_unit(store, pid: str):
    bob = user(2)
    opened = check(pid, 3, bob)  # 3,000,000
    await store.register_claim_checks(pid, [opened])
    usdc = opened.currency.address.lower()

    async def take(n: int):
        return await store.take_back(pid, f"d{n}", [TakeBack(opened.id, bob, usdc, 1_000_000)])

    async def close():
        async with store.update_claim_checks(pid, [opened.id], cc.close, bob):
            pass

    results = await asyncio.gather(take(1), close(), take(2), take(3), take(4))
    owed = sum(sum(result[1]) for result in results if result is not None)
    left = (await store.get_claim_checks(pid, [opened.id]))[0].amount
    assert left + (4_000_000 - owed) == 3_000_000  # every unit either out of the check or owed
