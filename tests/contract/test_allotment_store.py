"""The AllotmentStore contract: caps and budgets counted in one atomic step (API.md §8), to the smallest unit, on
SQLite and Redis (its Lua script), and with `-m cluster` on a Redis Cluster. Both adapters give exactly the grants
of the reference rule (rewards.domain.allotment.allot_each over tests.support.allotment.MemoryBook)."""

import asyncio
import random

import pytest

from rewards.domain import allotment
from rewards.domain.allotment import DAY_MS, Ask, CapRule, Grant, Limits, UnseededBudgets
from rewards.domain.integrity import Rejection
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import AllotmentStore
from tests.contract.support import assert_implements, user
from tests.support.allotment import MemoryBook

# Frozen for the rule (so the reference agrees), near Redis's own clock (which expires the counters).
NOW = now_ms()
CAP, BUDGET = Rejection.CAP_EXCEEDED, Rejection.BUDGET_EXHAUSTED
POINT, TOKEN = "point", "0x" + "ab" * 20
END, REF, WALLET = ("end_user",), ("referrer",), ("end_user", "referrer")
E18 = 10**18


@pytest.fixture(autouse=True)
def frozen_now(monkeypatch):
    from rewards.adapters.embedded.sqlite_state import allotment as sqlite_allotment
    from rewards.adapters.production.redis_state import allotment as redis_allotment

    for module in (sqlite_allotment, redis_allotment):
        monkeypatch.setattr(module, "now_ms", lambda: NOW)


def ask(n: int, units: int, who: User | None = None, side: str = "end_user", currency: str = POINT, at: int = NOW):
    return Ask(f"conversion:e{n}:0", who or user(1), side, currency, units, at)


def test_has_the_port(store: AllotmentStore):
    assert_implements(type(store), AllotmentStore)


async def test_a_budget_is_seeded_once_then_cut_to_the_unit(store: AllotmentStore, pid: str, other_pid: str):
    limits = Limits(budgets={POINT: 10 * E18})
    with pytest.raises(UnseededBudgets) as refused:
        await store.allot(pid, "d1", limits, [ask(1, E18)])
    assert refused.value.currencies == [POINT]
    assert await store.budgets_paid(pid, [POINT]) == {}  # nothing counted
    assert await store.allot(pid, "d1", limits, [ask(1, 4 * E18)], seeds={POINT: 5 * E18}) == [Grant(4 * E18, None)]
    assert await store.allot(pid, "d2", limits, [ask(2, E18), ask(3, 1)]) == [Grant(E18, None), Grant(0, BUDGET)]
    assert await store.budgets_paid(pid, [POINT, TOKEN]) == {POINT: 10 * E18}
    assert await store.budgets_paid(other_pid, [POINT]) == {}  # nothing crosses projects
    await store.reset_budgets(pid, [POINT])
    assert await store.budgets_paid(pid, [POINT]) == {}


async def test_a_delivery_is_counted_once_until_forgotten(store: AllotmentStore, pid: str):
    limits = Limits(budgets={TOKEN: 1000})
    asks = [ask(1, 600, currency=TOKEN), ask(2, 600, currency=TOKEN)]
    first = await store.allot(pid, "d1", limits, asks, {TOKEN: 0})
    assert first == [Grant(600, None), Grant(400, BUDGET)]
    # The same delivery read again after a crash: the same grants, nothing counted twice.
    assert await store.allot(pid, "d1", limits, asks) == first
    assert await store.budgets_paid(pid, [TOKEN]) == {TOKEN: 1000}
    # A delivery asking otherwise under the same token (never, by the plans): counted again, never paid beyond.
    assert await store.allot(pid, "d1", limits, asks[:1]) == [Grant(0, BUDGET)]
    await store.forget_grants(pid, ["d1"])
    assert await store.allot(pid, "d1", limits, asks) == [Grant(0, BUDGET), Grant(0, BUDGET)]
    assert await store.budgets_paid(pid, [TOKEN]) == {TOKEN: 1000}


async def test_caps_count_by_side_and_window(store: AllotmentStore, pid: str):
    alice, bob = user(1), user(2)
    limits = Limits(
        caps={
            POINT: (
                CapRule(END, 10, "all_time"),
                CapRule(WALLET, 15, "calendar_month"),
                CapRule(REF, 4, "rolling", DAY_MS),
            )
        }
    )
    got = await store.allot(
        pid,
        "d",
        limits,
        [
            ask(1, 8, alice),
            ask(2, 8, alice),  # all-time end_user cap: 2 left
            ask(3, 3, alice, "referrer"),
            ask(4, 3, alice, "referrer", at=NOW - DAY_MS // 2),  # one day's window holds both: 1 left
            ask(5, 3, alice, "referrer", at=NOW - 2 * DAY_MS),  # a day apart from both: 3, and the month's 15 is full
            ask(6, 9, bob),
        ],
    )
    assert got == [
        Grant(8, None),
        Grant(2, CAP),
        Grant(3, None),
        Grant(1, CAP),
        Grant(1, CAP),  # the wallet's month: 8 + 2 + 3 + 1 = 14 of 15
        Grant(9, None),
    ]


async def test_what_cannot_be_checked_is_refused(store: AllotmentStore, pid: str):
    limits = Limits(
        caps={POINT: (CapRule(END, 100, "rolling", 7 * DAY_MS),), TOKEN: (CapRule(END, 5, "calendar_month"),)}
    )
    old = NOW - allotment.KEPT_MS
    assert await store.allot(
        pid, "d", limits, [ask(1, 1, at=old), ask(2, 1, currency=TOKEN, at=old - 31 * DAY_MS)]
    ) == [
        Grant(0, CAP),
        Grant(0, CAP),
    ]
    assert await store.allot(pid, "d2", limits, [ask(3, 1, at=old + 1)]) == [Grant(1, None)]


async def test_units_past_any_float_stay_exact(store: AllotmentStore, pid: str):
    huge = 10**48 * E18  # the payout limit, in points' units
    limits = Limits(budgets={POINT: 3 * huge + 1}, caps={POINT: (CapRule(WALLET, 2 * huge, "rolling", 30 * DAY_MS),)})
    got = await store.allot(
        pid,
        "d",
        limits,
        [ask(1, huge), ask(2, huge, at=NOW - 1), ask(3, huge, user(2)), ask(4, huge, user(3))],
        {POINT: 0},
    )
    assert got == [Grant(huge, None), Grant(huge, None), Grant(huge, None), Grant(1, BUDGET)]
    assert await store.budgets_paid(pid, [POINT]) == {POINT: 3 * huge + 1}


async def test_concurrent_calls_never_pass_a_budget(store: AllotmentStore, pid: str):
    limits = Limits(budgets={POINT: 1000 * E18 + 7}, caps={POINT: (CapRule(WALLET, 300 * E18, "all_time"),)})
    await store.allot(pid, "d", limits, [], {POINT: 0})
    batches = [[ask(b * 100 + i, E18 + i, user(i % 5)) for i in range(20)] for b in range(10)]
    results = await asyncio.gather(*(store.allot(pid, "d", limits, batch) for batch in batches))
    granted = sum(g.units for grants in results for g in grants)
    assert granted == min(sum(a.units for b in batches for a in b), 1000 * E18 + 7)
    assert await store.budgets_paid(pid, [POINT]) == {POINT: granted}


@pytest.mark.parametrize("seed", range(12))
async def test_every_adapter_grants_what_the_reference_rule_grants(store: AllotmentStore, pid: str, seed: int):
    rng = random.Random(seed)
    users = [user(n) for n in range(1, 4)] + [User("Alice+x@Example.com", "email")]
    windows = [("all_time", 0), ("calendar_month", 0), ("rolling", DAY_MS), ("rolling", 7 * DAY_MS)]
    caps = {
        currency: tuple(
            CapRule(rng.choice([END, REF, WALLET]), rng.randrange(1, 60) * scale, *rng.choice(windows))
            for _ in range(rng.randrange(1, 4))
        )
        for currency, scale in ((POINT, E18), (TOKEN, 1))
    }
    limits = Limits(budgets={POINT: 400 * E18, TOKEN: 10**30}, caps=caps)
    seeds = {POINT: 7, TOKEN: 0}
    reference = MemoryBook(seeds)
    for delivery in range(8):
        asks = [
            Ask(
                f"conversion:d{delivery}-{i}:{rng.randrange(3)}",
                rng.choice(users),
                rng.choice(["end_user", "referrer"]),
                currency := rng.choice([POINT, TOKEN]),
                rng.randrange(0, 25) * (E18 if currency == POINT else 1) + rng.randrange(2),
                NOW - rng.randrange(0, 40 * DAY_MS) + rng.randrange(0, 3 * DAY_MS),
            )
            for i in range(rng.randrange(1, 30))
        ]
        asks += rng.sample(asks, k=min(3, len(asks)))  # repeats of a payout in one call: granted once
        expected = allotment.allot_each(asks, limits, reference, NOW)
        assert await store.allot(pid, "d", limits, asks, seeds) == expected
    assert await store.budgets_paid(pid, [POINT, TOKEN]) == reference.paid_units


async def settled(
    store: AllotmentStore, pid: str, delivery: str, limits: Limits, asks: list[Ask], seeds, seen: set | None = None
) -> list:
    """A delivery's two steps as the workers take them (stream_workers.allot): its tallies, then its payouts one by
    one where a tally was left to them (`seen`: the verdicts met)."""
    tallies, of = allotment.tallied(asks)
    verdicts = await store.allot_tallies(pid, delivery, limits, tallies, seeds)
    (seen if seen is not None else set()).update(verdicts)
    left = [ask for ask, number in zip(asks, of, strict=True) if verdicts[number] == allotment.ONE_BY_ONE]
    decided = iter(await store.allot(pid, f"{delivery}:each", limits, left, seeds))
    return [
        Grant(ask.units, None) if verdicts[number] == allotment.WHOLE
        else Grant(0, BUDGET) if verdicts[number] == allotment.EXHAUSTED
        else next(decided)
        for ask, number in zip(asks, of, strict=True)
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(12))
async def test_every_adapter_decides_tallies_as_the_reference_rule(store: AllotmentStore, pid: str, seed: int):
    """Tallies granted whole, budgets spent, the rest one by one: the grants of `allot_each` over every payout, with
    users near and far from their caps, budgets binding and spent, grants by time written by either step and read by
    the other."""
    rng = random.Random(seed)
    users = [user(n) for n in range(1, 5)] + [User("Alice+x@Example.com", "email")]
    windows = [("all_time", 0), ("calendar_month", 0), ("rolling", DAY_MS), ("rolling", 7 * DAY_MS)]
    caps = {
        currency: tuple(
            CapRule(rng.choice([END, REF, WALLET]), rng.randrange(20, 120) * scale, *rng.choice(windows))
            for _ in range(rng.randrange(1, 4))
        )
        for currency, scale in ((POINT, E18), (TOKEN, 1))
    }
    limits = Limits(budgets={POINT: rng.randrange(300, 900) * E18, TOKEN: 10**30}, caps=caps)
    seeds = {POINT: 7, TOKEN: 0}
    reference = MemoryBook(seeds)
    verdicts = set()
    for delivery in range(10):
        asks = [
            Ask(
                f"conversion:d{delivery}-{i}:0",
                rng.choice(users),
                rng.choice(["end_user", "referrer"]),
                currency := rng.choice([POINT, TOKEN]),
                rng.randrange(1, 12) * (E18 if currency == POINT else 1) + rng.randrange(2),
                NOW - rng.randrange(0, 40 * DAY_MS) // 3_600_000 * 3_600_000,
            )
            for i in range(rng.randrange(1, 40))
        ]
        expected = allotment.allot_each(asks, limits, reference, NOW)
        assert await settled(store, pid, f"d{delivery}", limits, asks, seeds, verdicts) == expected
    assert await store.budgets_paid(pid, [POINT, TOKEN]) == reference.paid_units
    assert {allotment.WHOLE, allotment.ONE_BY_ONE} <= verdicts, verdicts


async def test_a_delivery_of_tallies_is_counted_once(store: AllotmentStore, pid: str):
    limits = Limits(budgets={TOKEN: 1000}, caps={TOKEN: (CapRule(WALLET, 650, "rolling", DAY_MS),)})
    asks = [ask(1, 300, currency=TOKEN), ask(2, 300, user(2), currency=TOKEN), ask(3, 300, currency=TOKEN)]
    tallies = allotment.tallied(asks)[0]
    assert await store.allot_tallies(pid, "d1", limits, tallies, {TOKEN: 0}) == ["W", "W"]
    # Read again after a crash: the same verdicts, nothing counted twice.
    assert await store.allot_tallies(pid, "d1", limits, tallies) == ["W", "W"]
    assert await store.budgets_paid(pid, [TOKEN]) == {TOKEN: 900}

    async def one(delivery: str, late: Ask) -> list:
        return await store.allot_tallies(pid, delivery, limits, allotment.tallied([late])[0])

    # Alice has 600 of her 650 in the day (granted whole by her tally): 50 left, then the budget's last 50.
    assert await one("d2", ask(4, 200, currency=TOKEN, at=NOW - 1)) == ["1"]
    assert await store.allot(pid, "d2:each", limits, [ask(4, 200, currency=TOKEN, at=NOW - 1)]) == [Grant(50, CAP)]
    assert await one("d3", ask(5, 60, user(3), currency=TOKEN)) == ["1"]
    assert await store.allot(pid, "d3:each", limits, [ask(5, 60, user(3), currency=TOKEN)]) == [Grant(50, BUDGET)]
    assert await one("d4", ask(6, 1, user(4), currency=TOKEN)) == ["E"]  # spent: nothing counted
    assert await store.budgets_paid(pid, [TOKEN]) == {TOKEN: 1000}


async def test_an_expired_check_goes_back_to_its_budget_once(store: AllotmentStore, pid: str):
    limits = Limits(budgets={TOKEN: 1000})
    assert await store.allot(pid, "d", limits, [ask(1, 700, currency=TOKEN)], {TOKEN: 0}) == [Grant(700, None)]
    assert await store.release(pid, "cc_1", TOKEN, 300) is True
    assert await store.release(pid, "cc_1", TOKEN, 300) is False  # once per check
    assert await store.budgets_paid(pid, [TOKEN]) == {TOKEN: 400}
    assert await store.release(pid, "cc_2", TOKEN, 10**60) is True  # never below nothing
    assert await store.budgets_paid(pid, [TOKEN]) == {TOKEN: 0}
    assert await store.release(pid, "cc_3", POINT, 5) is True  # no budget in it: nothing to give back
    assert await store.budgets_paid(pid, [POINT]) == {}


async def test_a_reversal_gives_its_units_back_once(store: AllotmentStore, pid: str):
    alice, bob = user(1), user(2)
    caps = (CapRule(END, 10, "all_time"), CapRule(WALLET, 12, "calendar_month"), CapRule(REF, 5, "rolling", DAY_MS))
    limits = Limits(budgets={POINT: 30}, caps={POINT: caps})
    asks = [ask(1, 10, alice), ask(2, 5, alice, "referrer"), ask(3, 9, bob)]
    assert await store.allot(pid, "d1", limits, asks, {POINT: 0}) == [Grant(10, None), Grant(2, CAP), Grant(9, None)]
    assert await store.budgets_paid(pid, [POINT]) == {POINT: 21}
    # Alice's reward of 10 and her commission of 2 taken back: the budget, her all-time and month counters drop.
    back = [allotment.Tally(alice, "end_user", POINT, 10, {NOW: 10}), allotment.Tally(alice, "referrer", POINT, 2,
            {NOW: 2})]  # fmt: skip
    assert await store.give_back(pid, "d9:given_back", limits, back) is True
    assert await store.give_back(pid, "d9:given_back", limits, back) is False  # once per token
    assert await store.budgets_paid(pid, [POINT]) == {POINT: 9}
    again = [ask(4, 10, alice), ask(5, 5, alice, "referrer")]
    # all-time and month room back (10 of 10, then 2 of the month's 12); the rolling window still holds the 2 given
    # back (a rolling cap is not given back: stricter, never looser)
    assert await store.allot(pid, "d2", limits, again) == [Grant(10, None), Grant(2, CAP)]
    more = [allotment.Tally(bob, "end_user", POINT, 10**30, {NOW: 10**30})]
    assert await store.budgets_paid(pid, [POINT]) == {POINT: 21}
    assert await store.give_back(pid, "d10:given_back", limits, more) is True
    assert await store.budgets_paid(pid, [POINT]) == {POINT: 0}  # never below nothing
    unbudgeted = Limits(budgets={TOKEN: 5})
    assert await store.give_back(pid, "d11", unbudgeted, [allotment.Tally(bob, "end_user", TOKEN, 3, {NOW: 3})])
    assert await store.budgets_paid(pid, [TOKEN]) == {}  # a budget never seeded stays so


async def test_no_currency_passes_for_another(store: AllotmentStore, pid: str):
    """Counters are named by side, currency and user: a currency holding the separator cannot reach another's."""
    odd, plain = "0xa|email:b", "0xa"
    limits = Limits(caps={odd: (CapRule(END, 5, "all_time"),), plain: (CapRule(END, 5, "all_time"),)})
    first = Ask("conversion:o:0", User("c", "email"), "end_user", odd, 5, NOW)
    second = Ask("conversion:p:0", User("b|email:c", "email"), "end_user", plain, 5, NOW)
    assert await store.allot(pid, "d", limits, [first, second]) == [Grant(5, None), Grant(5, None)]
