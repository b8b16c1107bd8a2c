"""The arithmetic of caps and budgets (rewards/domain/allotment.py): exact to the smallest unit, and a rolling cap never
exceeded in any window, whatever the order in which events are processed."""

import random
from decimal import Decimal

import pytest

from rewards.domain.allotment import Grant, Room, calendar_month, grant, rolling_room, total_room
from rewards.domain.amounts import EXACT, exact_sum
from rewards.domain.integrity import Rejection

CAP, BUDGET = Rejection.CAP_EXCEEDED, Rejection.BUDGET_EXHAUSTED
DAY = 86_400_000


def test_a_payout_is_cut_by_the_least_room_and_named_after_it():
    assert grant(Decimal(10), []) == Grant(Decimal(10), None)
    assert grant(Decimal(10), [Room(Decimal(10), CAP)]) == Grant(Decimal(10), None)  # exactly fits
    assert grant(Decimal(10), [Room(Decimal(4), CAP), Room(Decimal(6), BUDGET)]) == Grant(Decimal(4), CAP)
    assert grant(Decimal(10), [Room(Decimal(4), CAP), Room(Decimal(4), BUDGET)]) == Grant(Decimal(4), BUDGET)
    assert grant(Decimal(10), [Room(Decimal(-3), CAP)]) == Grant(Decimal(0), CAP)  # a room overrun: nothing
    tiny = Decimal("0.000000000000000001")  # the smallest point
    assert grant(Decimal(1), [Room(Decimal(1) - tiny, CAP)]) == Grant(Decimal("0.999999999999999999"), CAP)
    raw = Decimal(10**47)  # a token's raw units near the payout limit (Decimal's own `+` would round at 28 digits)
    one_more = EXACT.add(raw, Decimal(1))
    assert grant(one_more, [total_room(EXACT.multiply(raw, Decimal(2)), raw, BUDGET)]) == Grant(raw, BUDGET)


def test_calendar_months_are_utc():
    assert calendar_month(1_764_547_199_999) == "2025-11"  # 2025-11-30T23:59:59.999Z
    assert calendar_month(1_764_547_200_000) == "2025-12"
    assert calendar_month(0) == "1970-01"


def test_a_rolling_window_counts_what_shares_a_window_with_the_payout():
    granted = [(0, Decimal(5)), (3 * DAY, Decimal(2)), (9 * DAY, Decimal(7))]
    # A 7-day cap of 10 for a payout on day 5: the windows holding day 5 end on days 5 to 12 and hold at most days
    # 0 and 3 (7) or days 3 and 9 (2 + 7 = 9, the window ending on day 9): room 1.
    assert rolling_room(Decimal(10), 7 * DAY, 5 * DAY, granted) == Room(Decimal(1), CAP)
    assert rolling_room(Decimal(10), 7 * DAY, 20 * DAY, granted) == Room(Decimal(10), CAP)  # none within a window
    # A window is (e − W, e]: a grant exactly W before the payout is out of every window holding it.
    assert rolling_room(Decimal(10), 7 * DAY, 7 * DAY, [(0, Decimal(9))]) == Room(Decimal(10), CAP)
    assert rolling_room(Decimal(10), 7 * DAY, 7 * DAY - 1, [(0, Decimal(9))]) == Room(Decimal(1), CAP)
    # A payout processed late, between grants made before it: still no window over the cap.
    around = [(DAY // 5, Decimal(4)), (4 * DAY // 5, Decimal(5))]  # 0.2 and 0.8 of a day: one window holds both
    assert rolling_room(Decimal(10), DAY, DAY // 2, around) == Room(Decimal(1), CAP)
    apart = [(0, Decimal(4)), (DAY, Decimal(5))]  # a day apart: no window of a day holds both
    assert rolling_room(Decimal(10), DAY, DAY // 2, apart) == Room(Decimal(5), CAP)


def _window_sums(granted: list[tuple[int, Decimal]], window_ms: int) -> list[Decimal]:
    """Every window's sum, by brute force: a window's sum changes only where a grant enters (its time) or leaves (its
    time + W), so those ends are every window there is to check."""
    ends = {t for t, _ in granted} | {t + window_ms - 1 for t, _ in granted}
    return [exact_sum(a for t, a in granted if end - window_ms < t <= end) for end in ends]


@pytest.mark.parametrize("seed", range(40))
def test_no_window_ever_exceeds_the_cap_whatever_the_order(seed):
    """Payouts of random sizes at random times, processed in a random order (late events among them), each granted
    what its rolling room allows: afterwards no window of the cap's length holds more than the cap, to the unit,
    and every payout got the most it could (granting it 1 unit more would break a window)."""
    rng = random.Random(seed)
    window = rng.choice([DAY, 7 * DAY, 30 * DAY])
    cap = Decimal(rng.randint(1, 500)) / 100
    granted: list[tuple[int, Decimal]] = []
    for _ in range(rng.randint(5, 60)):
        at = rng.randint(0, 90 * DAY)
        amount = Decimal(rng.randint(1, 30_000)) / 10_000
        given = grant(amount, [rolling_room(cap, window, at, granted)])
        assert Decimal(0) <= given.amount <= amount
        if given.amount < amount:
            unit = Decimal("0.0001")
            assert max(_window_sums([*granted, (at, given.amount + unit)], window)) > cap  # the most it could
        granted.append((at, given.amount))
        assert max(_window_sums(granted, window)) <= cap


def test_exact_on_eighteen_places_and_huge_token_amounts():
    cap = Decimal("1.000000000000000001")
    granted = [(0, Decimal("0.333333333333333333")), (1, Decimal("0.333333333333333333"))]
    room = rolling_room(cap, DAY, 2, granted)
    assert room.amount == Decimal("0.333333333333333335") and EXACT.add(room.amount, Decimal(0)) == room.amount
    big = Decimal(10**47)
    assert rolling_room(big * 3, DAY, 0, [(1, big), (2, big)]).amount == big
