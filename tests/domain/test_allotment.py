"""The arithmetic of caps and budgets (rewards/domain/allotment.py): exact to the smallest unit, and a rolling cap never
exceeded in any window, whatever the order in which events are processed."""

import random
from decimal import Decimal

import pytest

from rewards.domain.allotment import (
    Ask,
    CapRule,
    Grant,
    Limits,
    Room,
    allot,
    allot_each,
    calendar_month,
    from_units,
    grant,
    month_end_ms,
    month_end_of,
    rolling_room,
    to_units,
    total_room,
)
from rewards.domain.integrity import Rejection
from rewards.domain.payouts import User
from tests.support.allotment import MemoryBook

CAP, BUDGET = Rejection.CAP_EXCEEDED, Rejection.BUDGET_EXHAUSTED
DAY = 86_400_000
HOUR = 3_600_000


def test_a_payout_is_cut_by_the_least_room_and_named_after_it():
    assert grant(10, []) == Grant(10, None)
    assert grant(10, [Room(10, CAP)]) == Grant(10, None)  # exactly fits
    assert grant(10, [Room(4, CAP), Room(6, BUDGET)]) == Grant(4, CAP)
    assert grant(10, [Room(4, CAP), Room(4, BUDGET)]) == Grant(4, BUDGET)
    assert total_room(5, 8, CAP) == Room(0, CAP)  # a limit lowered below its count: nothing
    raw = 10**47 * 10**18  # near the payout limit, in units (floats would round at 2^53)
    assert grant(raw + 1, [total_room(2 * raw, raw, BUDGET)]) == Grant(raw, BUDGET)


def test_points_count_in_units_of_their_eighteenth_place():
    assert to_units(Decimal("0.000000000000000001"), "point") == 1
    assert to_units(Decimal("12.5"), "point") == 12_500_000_000_000_000_000
    assert to_units(Decimal(10**48), "0xtoken") == 10**48  # a token's raw units as they are
    assert from_units(1, "point") == Decimal("1E-18") and from_units(7, "0xtoken") == 7
    # 29 digits and more: never rounded to the default context's 28
    large = Decimal("12345678901.123456789012345678")
    assert to_units(large, "point") == 12_345_678_901_123_456_789_012_345_678
    assert from_units(12_345_678_901_123_456_789_012_345_678, "point") == large
    assert from_units(10**40 + 1, "point") == Decimal("10000000000000000000000.000000000000000001")


def test_calendar_months_are_utc():
    assert month_end_of("2025-11") == month_end_ms(1_764_547_199_999) == 1_764_547_200_000
    assert month_end_of("2025-12") == month_end_ms(1_764_547_200_000) == 1_767_225_600_000  # into the next year
    assert calendar_month(1_764_547_199_999) == "2025-11"  # 2025-11-30T23:59:59.999Z
    assert calendar_month(1_764_547_200_000) == "2025-12"
    assert calendar_month(0) == "1970-01"


def test_a_rolling_window_counts_what_shares_a_window_with_the_payout():
    granted = [(0, 5), (3 * DAY, 2), (9 * DAY, 7)]
    # A 7-day cap of 10 for a payout on day 5: the windows holding day 5 end on days 5 to 12 and hold at most days
    # 0 and 3 (7) or days 3 and 9 (2 + 7 = 9, the window ending on day 9): room 1.
    assert rolling_room(10, 7 * DAY, 5 * DAY, granted) == Room(1, CAP)
    assert rolling_room(10, 7 * DAY, 20 * DAY, granted) == Room(10, CAP)  # none within a window
    # A window is (e − W, e]: a grant exactly W before the payout is out of every window holding it.
    assert rolling_room(10, 7 * DAY, 7 * DAY, [(0, 9)]) == Room(10, CAP)
    assert rolling_room(10, 7 * DAY, 7 * DAY - 1, [(0, 9)]) == Room(1, CAP)
    # A payout processed late, between grants made before it: still no window over the cap.
    around = [(DAY // 5, 4), (4 * DAY // 5, 5)]  # 0.2 and 0.8 of a day: one window holds both
    assert rolling_room(10, DAY, DAY // 2, around) == Room(1, CAP)
    apart = [(0, 4), (DAY, 5)]  # a day apart: no window of a day holds both
    assert rolling_room(10, DAY, DAY // 2, apart) == Room(5, CAP)


def _window_sums(granted: list[tuple[int, int]], window_ms: int) -> list[int]:
    """Every window's sum, by brute force: a window's sum changes only where a grant enters (its time) or leaves (its
    time + W), so those ends are every window there is to check."""
    ends = {t for t, _ in granted} | {t + window_ms - 1 for t, _ in granted}
    return [sum(a for t, a in granted if end - window_ms < t <= end) for end in ends]


@pytest.mark.parametrize("seed", range(40))
def test_no_window_ever_exceeds_the_cap_whatever_the_order(seed):
    """Payouts of random sizes at random times, processed in a random order (late events among them), each granted
    what its rolling room allows: afterwards no window of the cap's length holds more than the cap, to the unit,
    and every payout got the most it could (granting it 1 unit more would break a window)."""
    rng = random.Random(seed)
    window = rng.choice([DAY, 7 * DAY, 30 * DAY])
    cap = rng.randint(1, 500)
    granted: list[tuple[int, int]] = []
    for _ in range(rng.randint(5, 60)):
        at = rng.randint(0, 90 * DAY)
        units = rng.randint(1, 300)
        given = grant(units, [rolling_room(cap, window, at, granted)])
        assert 0 <= given.units <= units
        if given.units < units:
            assert max(_window_sums([*granted, (at, given.units + 1)], window)) > cap  # the most it could
        granted.append((at, given.units))
        assert max(_window_sums(granted, window)) <= cap


def test_exact_past_any_float():
    cap = 10**18 + 1
    granted = [(0, 333_333_333_333_333_333), (1, 333_333_333_333_333_333)]
    assert rolling_room(cap, DAY, 2, granted).units == 333_333_333_333_333_335
    big = 10**65
    assert rolling_room(big * 3, DAY, 0, [(1, big), (2, big)]).units == big


@pytest.mark.parametrize("seed", range(200))
def test_granting_in_bulk_grants_what_the_rule_grants_one_by_one(seed):
    """`allot` (users far from their caps granted at once by `allot_tallies`, the rest one by one) against
    `allot_each` (the rule, one ask after the other), on random limits, users, sides, currencies and times (late and
    too old among them), over several calls (a payout of an earlier call asked again in a later one)."""
    rng = random.Random(seed)
    now = 1_800_000_000_000
    users = [User(f"u{n}", "email") for n in range(rng.randint(1, 4))]
    windows = [("all_time", 0), ("calendar_month", 0), ("rolling", DAY), ("rolling", 30 * DAY)]
    sides = [("end_user",), ("referrer",), ("end_user", "referrer")]
    limits = Limits(
        budgets={c: rng.randint(0, 400) for c in ("point", "t") if rng.random() < 0.6},
        caps={
            c: tuple(
                CapRule(rng.choice(sides), rng.randint(0, 120), *rng.choice(windows)) for _ in range(rng.randint(1, 3))
            )
            for c in ("point", "t")
            if rng.random() < 0.7
        },
    )
    seeds = {c: rng.randint(0, 50) for c in limits.budgets}
    one, bulk = MemoryBook(seeds), MemoryBook(seeds)
    for call in range(rng.randint(1, 5)):
        asks = [
            Ask(f"p{call}-{n}" if rng.random() < 0.8 else f"p0-{n}", rng.choice(users),
                rng.choice(["end_user", "referrer"]), rng.choice(["point", "t"]), rng.randint(1, 40),
                now - rng.randint(-3 * 24, 80 * 24) * HOUR)  # on the hour: windows meet exactly
            for n in range(rng.randint(1, 25))
        ]  # fmt: skip
        assert allot(asks, limits, bulk, now) == allot_each(asks, limits, one, now)

    def counted(book: MemoryBook) -> tuple:  # (reading a counter of the book's makes it 0: those are left out)
        return book.paid_units, *({k: v for k, v in d.items() if v} for d in (book.totals, book.months))

    assert counted(bulk) == counted(one)


def test_a_grant_is_counted_where_the_caps_covering_its_side_read():
    limits = Limits(
        caps={
            "point": (
                CapRule(("end_user",), 5, "rolling", DAY),
                CapRule(("referrer",), 5, "calendar_month"),
                CapRule(("end_user", "referrer"), 9, "all_time"),
            ),
            "t": (CapRule(("referrer",), 5, "calendar_month"),),
        },
        budgets={"u": 5},
    )
    assert limits.counts("point", "end_user") == "th"  # all-time total (the wallet's, the rolling cap's), by time
    assert limits.counts("point", "referrer") == "tm"
    assert (limits.counts("t", "end_user"), limits.counts("t", "referrer")) == ("", "m")
    assert limits.counts("u", "end_user") == ""  # a budget only: its paid counter alone
    assert (limits.counts("point", "wallet"), limits.counts("t", "wallet")) == ("t", "")  # what wallet caps read
