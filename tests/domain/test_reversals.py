"""API.md §9's reversals, the pure rules (rewards/domain/reversals.py): fractions, repeats, what a payout gives back,
claim checks and debts."""

import itertools
import random
from decimal import Decimal

import pytest

from rewards.domain.amounts import exact_sum
from rewards.domain.claim_checks import ClaimCheck
from rewards.domain.limits import LimitError
from rewards.domain.payout_config import TokenCurrency
from rewards.domain.payouts import User
from rewards.domain.reversals import (
    Owed,
    PastWhole,
    Reversal,
    TakeBack,
    TooMany,
    against_debt,
    from_check,
    parse_fraction,
    parse_reason,
    settle,
    settle_debts,
    take_back,
    taken_back,
)

D = Decimal


@pytest.mark.parametrize("good", ["1", "0.5", "0.000000000000000001", "1.000", 0.25, 1])
def test_a_fraction_is_above_0_and_at_most_1(good):
    assert D(0) < parse_fraction(good) <= 1


@pytest.mark.parametrize("bad", ["0", "0.0", "1e-30", "1.0000000000000000001", "1.5", "-0.5", "", "½", True, None, []])
def test_a_fraction_outside_or_past_18_places_is_refused(bad):
    with pytest.raises(LimitError):
        parse_fraction(bad)


def test_a_reason_is_a_short_note():
    assert parse_reason("refund") == "refund"
    for bad in ("", "   ", "x" * 10_240, 5, None):
        with pytest.raises(LimitError):
            parse_reason(bad)


def test_an_events_shares_never_pass_1_and_a_repeat_counts_once():
    half, refund = Reversal("order-1", "refund", D("0.5")), Reversal("order-1", "refund", D("0.50"))
    settled = settle([half, refund, Reversal("order-2", "chargeback", D("1"))], {}, set())
    assert settled.applied == [half, Reversal("order-2", "chargeback", D("1"))]  # 0.5 and 0.50: the same one
    assert settled.shares == {"order-1": (0, D("0.5")), "order-2": (0, 1)}
    # Sent again later: counts 0; another reason is another reversal, up to the whole event.
    seen = {half.digest()}
    again = settle([half, Reversal("order-1", "damaged", D("0.5"))], {"order-1": D("0.5")}, seen)
    assert again.applied == [Reversal("order-1", "damaged", D("0.5"))] and again.shares == {"order-1": (D("0.5"), 1)}
    too_much = [Reversal("order-3", "a", D("0.3")), Reversal("order-1", "more", D("0.6"))]
    with pytest.raises(PastWhole) as past:
        settle(too_much, {"order-1": D("0.5")}, set())
    assert past.value.dedup_id == "order-1"


def test_each_reversal_steps_its_events_share_and_an_event_has_at_most_1000():
    first, second = Reversal("order-1", "a", D("0.25")), Reversal("order-1", "b", D("0.5"))
    settled = settle([first, second], {"order-1": D("0.125")}, set())
    assert settled.steps == [(first, D("0.125"), D("0.375")), (second, D("0.375"), D("0.875"))]
    hundredths = [Reversal("order-2", f"part {n}", D("0.01")) for n in range(100)]
    assert settle(hundredths, {}, set()).shares == {"order-2": (0, 1)}
    with pytest.raises(TooMany) as many:
        settle([Reversal("order-3", "one more", D("0.000001"))], {"order-3": D("0.001")}, set(), {"order-3": 1000})
    assert many.value.dedup_id == "order-3"


def test_a_payout_gives_back_its_share_in_whole_units_and_all_of_it_once_reversed_whole():
    assert taken_back(D(1), D(0), D("0.5"), is_points=False) == 0  # half of one raw unit: nothing yet
    assert taken_back(D(1), D("0.5"), D(1), is_points=False) == 1  # the rest of the event: the unit
    third = D(1) / 3
    assert taken_back(D(10), D(0), third, is_points=True) == D("3.333333333333333333")
    rng = random.Random(7)
    for _ in range(500):
        amount = D(rng.randrange(1, 10**24)).scaleb(-rng.choice([0, 18]))
        is_points = amount != amount.to_integral_value()
        cuts = sorted(D(rng.randrange(1, 10**6)) / 10**6 for _ in range(rng.randrange(0, 5)))
        shares = [D(0), *cuts, D(1)]
        given = [taken_back(amount, a, b, is_points) for a, b in itertools.pairwise(shares)]
        assert all(part >= 0 for part in given) and exact_sum(given) == amount  # never more; all of it in the end


def test_an_open_check_gives_back_a_closed_one_makes_a_debt():
    assert from_check("open", 100, 30) == (30, 0)
    assert from_check("open", 20, 30) == (20, 10)  # (a check already reduced below what is owed)
    assert from_check("closed", 100, 30) == (0, 30) and from_check("claimed", 100, 30) == (0, 30)
    assert from_check("expired", 100, 30) == (0, 0)  # its amount went back to the budget already
    assert against_debt(50, 30) == (20, 0) and against_debt(10, 30) == (0, 20) and against_debt(10, 0) == (10, 0)


def _check(amount: int, status: str) -> ClaimCheck:
    usdc = TokenCurrency(address="0xusdc", chain_id=1, name="USDC", decimals=6)
    bob = User("0xb0b", "evm_address")
    return ClaimCheck("cc_1", bob, usdc, amount, "end_user_payout", status, None, "e-1", 1, None, 1)


def test_a_token_payout_is_taken_back_from_its_open_check_and_the_rest_owed():
    bob = User("0xb0b", "evm_address")
    items = [TakeBack("cc_1", bob, "0xusdc", 300), TakeBack("cc_1", bob, "0xusdc", 800), TakeBack("cc_2", bob,
             "0xusdc", 50), TakeBack("cc_3", bob, "0xusdc", 7)]  # fmt: skip
    checks = {"cc_1": _check(1000, "open"), "cc_2": _check(90, "claimed"), "cc_3": _check(90, "expired")}
    changed, debts, added = take_back(items, checks, {(bob, "0xusdc"): 5})
    assert (changed["cc_1"].amount, changed["cc_1"].version) == (0, 2) and set(changed) == {"cc_1"}
    assert added == [0, 100, 50, 0] and debts == {(bob, "0xusdc"): 155}  # 5 owed before, then 100 and 50


def test_new_checks_settle_debts_first():
    bob, carol = User("0xb0b", "evm_address"), User("0xca", "evm_address")
    asks = [Owed(bob, "0xusdc", 100), Owed(bob, "0xusdc", 100), Owed(carol, "0xusdc", 10), Owed(bob, "0xdai", 1)]
    left, settled = settle_debts(asks, {(bob, "0xusdc"): 150, (bob, "0xdai"): 0})
    assert settled == [100, 50, 0, 0] and left == {(bob, "0xusdc"): 0}
