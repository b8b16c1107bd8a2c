"""API.md §7: the published client's payout methods (docs/fuul-sdk-7.41.0-surface.md, G6) through the client itself
(tests/compat/run.mjs), on both shapes: what each resolves to is what the service answers over plain HTTP, and its
values are what the events of tests/query_api/test_user_payouts.py paid."""

import pytest

from rewards.domain.payout_config import external_id
from tests.compat.driver import run_calls
from tests.compat.test_compat_sdk import Shop, failed, ok, sdk_installed  # noqa: F401 (a fixture used by name)
from tests.query_api.test_user_payouts import (
    ALICE,
    BOB,
    CAROL,
    DAN,
    EVM,
    TOKEN,
    USDC,
    earning,
    groups,
    referred,
    set_up,
)
from tests.support.harness import eventually


@pytest.fixture(scope="module")
def shop(client_base) -> Shop:
    """One project per shape, holding tests/query_api/test_user_payouts.py's referrals, events and claim checks."""
    shop = Shop(*client_base)
    set_up(shop.http)
    yield shop
    shop.http.close()


def user(identifier: str, **more) -> dict:
    return {"user_identifier": identifier, "identifier_type": EVM, **more}


def test_payouts_and_points_by_conversion(shop):
    def settled():
        points, tokens, alice, paged, windowed, own, other = shop.sdk(
            shop.standard_key,
            ("getUserPointsByConversion", user(BOB)),  # the client adds type=point
            ("getUserPayoutsByConversion", user(BOB)),  # type=onchain-currency
            ("getUserPointsByConversion", user(ALICE)),
            ("getUserPointsByConversion", user(BOB, page=2, page_size=2)),
            ("getUserPointsByConversion", user(BOB, **{"from": "2026-01-10T00:00:00Z", "to": "2026-01-10"})),
            ("getUserPointsByConversion", user(BOB, project_id=shop.project_id)),
            ("getUserPointsByConversion", user(BOB, project_id="0" * 32)),
        )
        assert groups(ok(points)) == [("purchase", True, "5"), ("purchase", False, "14"),
                                      ("referral_reward", True, "50"), ("referral_reward", False, "10"),
                                      ("signup", False, "2")]  # fmt: skip
        return points, tokens, alice, paged, windowed, own, other

    points, tokens, alice, paged, windowed, own, other = eventually(settled)
    assert ok(points) == shop.read("/payouts", type="point", **user(BOB))
    assert ok(own) == ok(points)
    assert failed(other, 403)["message"] == "project_id is not this key's project"
    assert groups(ok(alice)) == [("purchase", True, "18.5"), ("referral_reward", True, "100"), ("signup", True, "8")]
    assert groups(ok(paged)) == [("referral_reward", True, "50"), ("referral_reward", False, "10")]
    assert (ok(paged)["page"], ok(paged)["page_size"], ok(paged)["total_results"]) == (2, 2, 5)
    assert groups(ok(windowed)) == [("purchase", False, "14")]

    tokens = ok(tokens)
    assert tokens == shop.read("/payouts", type="onchain-currency", **user(BOB))
    assert [(r["conversion_id"], r["is_referrer"], r["total_amount"], r["currency_address"], r["chain_id"])
            for r in tokens["results"]] == [("swap", True, "3000000", *USDC),
                                            ("swap", False, "1560000", *USDC)]  # fmt: skip


def test_payout_and_points_movements(shop):
    def settled():
        points, tokens, window = shop.sdk(
            shop.standard_key,
            ("getUserPointsMovements", user(BOB, page_size=3)),
            ("getUserPayoutMovements", user(BOB)),
            ("getUserPointsMovements", user(CAROL, from_date="2026-01-11", to_date="2026-01-11")),
        )
        assert [r["payout_status"] for r in ok(tokens)["results"]] == ["open", "closed", "claimed"]
        return points, tokens, window

    points, tokens, window = eventually(settled)
    points = ok(points)
    assert points == shop.read("/payouts/movements", type="point", **user(BOB), page_size=3)
    assert (points["total_results"], points["page"], points["page_size"]) == (6, 1, 3)
    assert [(r["conversion_name"], r["is_referrer"], r["total_amount"]) for r in points["results"]] == [
        ("referral_reward", True, "50"), ("referral_reward", False, "10"), ("signup", False, "2")]  # fmt: skip
    assert points["results"][2]["date"] == "2026-01-14T10:00:00.000Z"
    assert {(r["payout_status"], r["payout_status_details"], r["project_name"]) for r in points["results"]} == {
        ("paid", None, shop.project_id)}  # fmt: skip

    tokens = ok(tokens)
    assert tokens == shop.read("/payouts/movements", type="onchain-currency", **user(BOB))
    assert [(r["date"], r["total_amount"], r["is_referrer"], r["currency_address"], r["chain_id"])
            for r in tokens["results"]] == [
        ("2026-01-13T10:00:00.000Z", "60000", False, TOKEN["address"], 1),
        ("2026-01-13T10:00:00.000Z", "1500000", False, TOKEN["address"], 1),
        ("2026-01-12T10:00:00.000Z", "3000000", True, TOKEN["address"], 1),
    ]  # fmt: skip
    assert [(r["conversion_id"], r["total_amount"]) for r in ok(window)["results"]] == [("purchase", "10")]


def test_payouts_by_referrer(shop):
    shop.http.settle()  # the shop's code uses too (the project's own partition)
    alice = {"user_identifier": ALICE, "user_identifier_type": EVM}
    active, everyone, window, bob = shop.sdk(
        shop.standard_key,
        ("getPayoutsByReferrer", alice),
        ("getPayoutsByReferrer", {**alice, "referrer_scope": "all"}),
        ("getPayoutsByReferrer", {**alice, "from_date": "2026-01-11", "to_date": "2026-01-12"}),
        ("getPayoutsByReferrer", {"user_identifier": BOB, "user_identifier_type": EVM}),
    )
    assert ok(active) == shop.read("/payouts/by-referrer", **alice)
    by_user = referred(ok(active))
    assert list(by_user) == [BOB]
    assert (by_user[BOB]["volume"], by_user[BOB]["direct_eligible_volume"]) == (200, 200)
    assert by_user[BOB]["earnings"] == [earning(24), earning(240000, *USDC)]
    assert by_user[BOB]["total_commission_earned"] == [earning(26.5), earning(1740000, *USDC)]
    assert (by_user[BOB]["referral_code"], by_user[BOB]["user_rebate_rate"]) == ("ALICE", 0.2)
    assert list(referred(ok(everyone))) == [BOB, DAN]
    assert referred(ok(window))[BOB]["indirect_eligible_volume"] == 50 and referred(ok(window))[BOB]["earnings"] == []
    assert referred(ok(bob))[CAROL]["earnings"] == [earning(5), earning(3000000, *USDC)]


def term(amount, currency, unit) -> dict:
    return {"amount": amount, "currency": currency, "unit": unit}


NONE = term(None, None, "none")


def test_incentives_by_tier(shop):
    every, some, unknown = shop.sdk(
        shop.standard_key,
        ("getIncentivesByTier",),
        ("getIncentivesByTier", {"tier_ids": ["gold", "null"]}),  # sent as tier_ids=gold,null
        ("getIncentivesByTier", {"tier_ids": ["platinum"]}),
    )
    every = ok(every)
    assert every == shop.read("/payouts/terms-by-tier")
    assert [(t["tier_id"], t["tier_name"], t["tier_slug"], t["tier_rank"]) for t in every["tiers"]] == [
        (None, None, None, None), ("base", "Base", "base", 1), ("gold", "Gold", "gold", 2)]  # fmt: skip
    default, base_tier, gold = every["tiers"]
    assert default["payout_terms"] == base_tier["payout_terms"]  # no tier of one's own: the default tier's rates
    purchase, swap, signup = base_tier["payout_terms"]
    assert purchase == {
        "conversion_name": "purchase", "payout_type": "variable", "payee_type": "both", "is_multi_level": True,
        "affiliate_rate": term("10", "point", "%"), "affiliate2_rate": term("5", "point", "%"),
        "affiliate3_rate": term("2", "point", "%"), "affiliate4_rate": term("1", "point", "%"),
        "end_user_rate": term("10", "point", "fixed"),
    }  # fmt: skip
    # a rate of 0.3 of the revenue: r1 0.1 is 3% of it, the end user's 0.5 of the base 15%
    assert [swap[k] for k in ("affiliate_rate", "affiliate4_rate", "end_user_rate")] == [
        term("3", "USDC", "%"), term("0.3", "USDC", "%"), term("15", "USDC", "%")]  # fmt: skip
    assert (signup["payout_type"], signup["payee_type"], signup["affiliate2_rate"], signup["end_user_rate"]) == (
        "fixed", "affiliate", term("5", "point", "fixed"), NONE)  # fmt: skip
    assert [gold["payout_terms"][0][k] for k in ("affiliate_rate", "affiliate3_rate")] == [
        term("20", "point", "%"), term("0", "point", "%")]  # fmt: skip
    assert [t["tier_id"] for t in ok(some)["tiers"]] == ["gold", None]
    assert "platinum" in failed(unknown, 400)["message"]


def test_conversions(shop):
    listed, deprecated_query, incentives = shop.sdk(
        shop.standard_key,
        ("getConversions",),
        ("getConversions", user(BOB)),  # the deprecated query: ignored
        ("getIncentives",),  # out of scope (API.md §7), deprecated: the same request, the same answer
    )
    listed = ok(listed)
    assert listed == ok(deprecated_query) == ok(incentives) == shop.read("/conversions")
    assert [(c["id"], c["name"], c["slug"], c["external_id"]) for c in listed] == [
        (name, name, name, external_id(name)) for name in ("purchase", "swap", "signup")]  # fmt: skip
    assert len({c["external_id"] for c in listed}) == 3
    purchase, swap, signup = (c["payout_terms"][0] for c in listed)
    assert (swap["type"], swap["calculation_strategy"], swap["trigger_amount_source"]) == (
        "onchain-currency", "variable", "revenue")  # fmt: skip
    assert (swap["payout_currency_address"], swap["payout_currency_chain_id"]) == (TOKEN["address"], 1)
    assert (purchase["type"], purchase["trigger_amount_source"], purchase["payout_currency_address"]) == (
        "point", "volume", None)  # fmt: skip
    base_group, gold_group = purchase["payout_groups"]
    assert (base_group["affiliate_amount_percentage"], base_group["affiliate2_amount_percentage"]) == (10, 5)
    assert (gold_group["affiliate_amount_percentage"], gold_group["end_user_amount"]) == (20, "10")
    assert gold_group["project_tier"] == {"id": "gold", "name": "Gold", "slug": "gold", "rank": 2, "description": None}
    assert (signup["calculation_strategy"], signup["payout_groups"][0]["affiliate_amount"]) == ("fixed", "10")
    assert listed[0]["triggers"][0]["type"] == "off-chain-event"


def test_a_key_of_another_project_reads_nothing_of_this_one(shop):
    other = Shop(shop.server, shop.base_url.removesuffix("/api/v1"))
    try:
        points, referrals = run_calls(other.base_url, other.standard_key, [
            {"method": "getUserPointsByConversion", "args": [user(BOB)]},
            {"method": "getPayoutsByReferrer", "args": [{"user_identifier": ALICE, "user_identifier_type": EVM}]},
        ])  # fmt: skip
        assert ok(points)["results"] == [] and ok(referrals) == []
    finally:
        other.http.close()
