"""API.md §8 on both shapes: caps and budgets in the configuration, a payout cut to what fits (its paid part and its
rejected rest under one id), every figure counting the paid part only, and GET /projects/budgets.

Bob referred Carol. Purchases of 100 pay the buyer 10 points and its level-1 referrer 10% (10 points). Caps: 25
points per user as the user over 30 days, 3 points per referrer per calendar month. A second project has budgets: 55
points, and 20 USDC (claim checks) for a token conversion."""

from decimal import Decimal

import pytest

from tests.conftest import event, evm
from tests.support.harness import Admin, Api, eventually

ALICE, BOB, CAROL = evm(1), evm(2), evm(3)
USDC = {"address": "0xA0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "chain_id": 1, "name": "USDC", "decimals": 6}
TIERS = [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0", "r3": "0", "r4": "0"}}]
PURCHASE = {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "end_user_reward": {"fixed": "10"}}
CAPPED = {
    "default_tier": "base",
    "tiers": TIERS,
    "conversions": [PURCHASE],
    "caps": [
        {"applies_to": "end_user", "currency": "point", "amount": "25", "window": "30d"},
        {"applies_to": "referrer", "currency": "point", "amount": "3", "window": "calendar_month"},
    ],
}
SWAP = {"event_name": "swap", "base": {"fixed": "6"}, "currency": USDC, "end_user_reward": {"rate": "1"}}
BUDGETED = {
    "default_tier": "base",
    "tiers": TIERS,
    "conversions": [PURCHASE, SWAP],
    "budgets": [{"currency": "point", "amount": "55"}, {"currency": USDC["address"], "amount": "20000000"}],
}


def who(identifier: str) -> dict:
    return {"user_identifier": identifier, "user_identifier_type": "evm_address"}


def buy(api: Api, dedup_id: str, user: str, name: str = "purchase") -> None:
    purchase = {**event(dedup_id, user, name), "args": {"value": {"amount": "100"}}}
    assert api.post("/events/batch", json={"events": [purchase]}).status_code == 200
    api.wait_processed(dedup_id)


def movements(api: Api, user: str, currency: str = "point") -> list[tuple]:
    answer = api.get("/payouts/movements", params={"type": currency, "user_identifier": user,
                                                    "identifier_type": "evm_address", "page_size": 100})  # fmt: skip
    assert answer.status_code == 200, answer.text
    return sorted(
        (r["total_amount"], r["payout_status"], r["payout_status_details"], r["id"]) for r in answer.json()["results"]
    )


def points_of(api: Api, user: str) -> Decimal:
    answer = api.get(f"/payouts/totals/{user}", params={"identifier_type": "evm_address"})
    assert answer.status_code == 200, answer.text
    return Decimal(answer.json()["total_points"])


@pytest.fixture(scope="module")
def capped(server):
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=CAPPED).status_code == 200
    code = api.post("/referral_codes", json={**who(BOB), "quantity": 1}).json()[0]["code"]
    assert api.patch(f"/referral_codes/{code}/use", json=who(CAROL)).status_code == 200
    yield api
    api.close()


def test_the_configuration_keeps_caps_and_budgets_as_sent(capped: Api):
    shown = capped.get("/projects/config").json()
    assert shown["caps"] == CAPPED["caps"] and shown["budgets"] == []


def test_a_cap_cuts_a_payout_into_its_paid_part_and_its_rejected_rest(capped: Api):
    for n in range(3):
        buy(capped, f"alice-{n}", ALICE)
    paid = [m for m in movements(capped, ALICE) if m[1] != "rejected"]
    rejected = [m for m in movements(capped, ALICE) if m[1] == "rejected"]
    assert sorted(m[0] for m in paid) == ["10", "10", "5"]  # 25 in all: the cap
    assert [(m[0], m[2]) for m in rejected] == [("5", "cap_exceeded")]
    cut = next(m for m in paid if m[0] == "5")
    assert rejected[0][3] == cut[3] + ":rejected"  # one payout, two movements
    eventually(lambda: _equal(points_of(capped, ALICE), Decimal(25)))
    buy(capped, "alice-3", ALICE)  # the cap is full: all of it refused
    assert ("10", "rejected", "cap_exceeded") in [m[:3] for m in movements(capped, ALICE)]
    eventually(lambda: _equal(points_of(capped, ALICE), Decimal(25)))


def test_a_referrer_cap_counts_commissions_and_leaves_the_user_paid(capped: Api):
    buy(capped, "carol-0", CAROL)
    buy(capped, "carol-1", CAROL)
    # 10 asked twice: 3 paid, 7 refused; then all 10 refused (the month's 3 are paid already).
    figures = sorted((m[0], m[1] == "rejected", m[2]) for m in movements(capped, BOB))
    assert figures == [("10", True, "cap_exceeded"), ("3", False, None), ("7", True, "cap_exceeded")]
    eventually(lambda: _equal(points_of(capped, BOB), Decimal(3)))
    eventually(lambda: _equal(points_of(capped, CAROL), Decimal(20)))  # her own 10 + 10: under her 25


def test_the_summary_counts_what_was_paid(capped: Api):
    def check():
        summary = capped.get("/payouts/summary", params={"currency": "point"}).json()
        assert Decimal(summary["total_payouts"]) == points_of(capped, ALICE) + points_of(capped, BOB) + points_of(
            capped, CAROL
        )

    eventually(check)


@pytest.fixture(scope="module")
def budgeted(server):
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    yield api
    api.close()


def test_budgets_start_from_what_was_paid_and_are_never_exceeded(budgeted: Api):
    no_budget = {**BUDGETED, "budgets": []}
    assert budgeted.put("/projects/config", json=no_budget).status_code == 200
    assert budgeted.get("/projects/budgets").json() == []
    buy(budgeted, "before", ALICE)  # 10 points paid before any budget
    assert budgeted.put("/projects/config", json=BUDGETED).status_code == 200
    eventually(lambda: _budget(budgeted, "point", paid="10", remaining="45"))
    for n in range(5):  # 5 × 10 points asked, 45 left: 4 paid whole, the 5th cut to 5
        buy(budgeted, f"p-{n}", evm(10 + n))
    rejected = [m for n in range(5) for m in movements(budgeted, evm(10 + n)) if m[1] == "rejected"]
    assert [(m[0], m[2]) for m in rejected] == [("5", "budget_exhausted")]
    assert _budget(budgeted, "point", amount="55", paid="55", reserved="0", remaining="0")
    eventually(lambda: _equal(_summary(budgeted), Decimal(55)))


def _summary(api: Api) -> Decimal:
    return Decimal(api.get("/payouts/summary", params={"currency": "point"}).json()["total_payouts"])


def test_a_token_budget_counts_its_claim_checks_as_reserved(budgeted: Api):
    if not budgeted.get("/projects/config").json()["budgets"]:
        assert budgeted.put("/projects/config", json=BUDGETED).status_code == 200
    for n in range(4):  # 6 USDC each, 20 in the budget: 6, 6, 6, 2
        buy(budgeted, f"swap-{n}", evm(30 + n), "swap")
    usdc = USDC["address"].lower()
    eventually(lambda: _budget(budgeted, usdc, paid="20000000", reserved="20000000", remaining="0"))
    rejected = [m for n in range(4) for m in movements(budgeted, evm(30 + n), "onchain-currency") if m[1] == "rejected"]
    assert [(m[0], m[2]) for m in rejected] == [("4000000", "budget_exhausted")]  # raw units


def _budget(api: Api, currency: str, **expected: str) -> bool:
    answer = api.get("/projects/budgets")
    assert answer.status_code == 200, answer.text
    found = next(b for b in answer.json() if b["currency"] == currency)
    assert {key: found[key] for key in expected} == expected, found
    return True


def _equal(found, expected):
    assert found == expected, found
    return found


CAP = {"applies_to": "wallet", "currency": "point", "amount": "5", "window": "7d"}


@pytest.mark.parametrize(
    ("caps", "budgets", "problem"),
    [
        ([{**CAP, "window": "0d"}], [], "window must be a positive integer"),
        ([{**CAP, "window": "10000000d"}], [], "at most 3650 days"),
        ([{**CAP, "window": "3651d"}], [], "at most 3650 days"),
        ([{**CAP, "window": "7 d"}], [], "window must be"),
        ([{**CAP, "window": "week"}], [], "window must be"),
        ([{**CAP, "window": 7}], [], "string"),
        ([{**CAP, "amount": "-1"}], [], "plain non-negative decimal"),
        ([{**CAP, "amount": "1e30"}], [], "plain non-negative decimal"),
        ([{**CAP, "amount": "1" + "0" * 30}], [], "below 10^30"),
        ([{**CAP, "amount": "0.0000000000000000001"}], [], "18 fractional digits"),
        ([{**CAP, "currency": "0xabc", "amount": "1.5"}], [], "raw integer"),
        ([{**CAP, "applies_to": "everyone"}], [], "applies_to"),
        ([CAP, {**CAP, "amount": "6"}], [], "one cap only"),
        ([{**CAP, "window": f"{n + 1}d"} for n in range(101)], [], "at most 100"),
        ([{**CAP, "currency": ""}], [], "currency"),
        ([{**CAP, "extra": 1}], [], "extra"),
        ([], [{"currency": "point", "amount": "1"}, {"currency": "POINT", "amount": "2"}], "one budget only"),
        ([], [{"currency": "point", "amount": "-5"}], "plain non-negative decimal"),
        ([], [{"currency": "0xabc", "amount": "0.5"}], "raw integer"),
        ([], [{"currency": "point"}], "amount"),
    ],
)
def test_bad_caps_and_budgets_are_refused_whole(capped: Api, caps, budgets, problem):
    answer = capped.put("/projects/config", json={**CAPPED, "caps": caps, "budgets": budgets})
    assert answer.status_code == 400 and problem in answer.text, answer.text
    assert capped.get("/projects/config").json()["caps"] == CAPPED["caps"]  # nothing changed


def test_odd_currencies_are_kept_exactly_and_harm_no_one(capped: Api, server):
    odd = ['quo"te', "back\\slash", "é\u2028", "x" * 128]
    document = {
        **CAPPED,
        "caps": [{**CAP, "currency": c} for c in odd],
        "budgets": [{"currency": odd[0], "amount": "1"}],
    }
    assert capped.put("/projects/config", json=document).status_code == 200
    try:
        assert [c["currency"] for c in capped.get("/projects/config").json()["caps"]] == [c.lower() for c in odd]
        assert capped.get("/projects/budgets").json() == [
            {"currency": odd[0], "amount": "1", "paid": "0", "reserved": "0", "remaining": "1"}
        ]
        buy(capped, "odd-0", evm(40))  # the points it pays are under no cap or budget now
        eventually(lambda: _equal(points_of(capped, evm(40)), Decimal(10)))
    finally:
        assert capped.put("/projects/config", json=CAPPED).status_code == 200
