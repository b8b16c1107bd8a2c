"""API.md §7 through the published client (`@fuul/sdk`, tests/compat): every affiliate portal method
(`getAffiliateStats`, `getAffiliateTotalStats`, `getReferralTree`, `getStatsBreakdown`, `getAffiliateNewTraders`,
`getAffiliatePaidVolumesByLevel`) on both shapes, with the parameters the client sends as it sends them (no identifier
type, `this_month` as `true`/`false`, bracket arrays), resolving to the figures of a 4-level chain: JSON numbers where
the client declares numbers, the count of new traders a string."""

from datetime import UTC, datetime, timedelta

import pytest

from rewards.domain.payout_config import external_id
from tests.compat.driver import ensure_sdk, run_calls
from tests.compat.test_compat_sdk import TOKEN, Shop, addr, failed, ok, who

A, B, C, D, E = 1, 2, 3, 4, 5
RATES = {"r1": "0.1", "r2": "0.05", "r3": "0.02", "r4": "0.01"}
CONFIG = {
    "default_tier": "base",
    "tiers": [{"id": "base", "name": "Base", "rank": 1, "rates": RATES}],
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point"},
        {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"}, "currency": TOKEN},
    ],
}  # fmt: skip
TODAY = datetime.now(UTC).date()
WEEK = {"from": (TODAY - timedelta(days=6)).isoformat(), "to": TODAY.isoformat()}


def event(dedup_id: str, n: int, name: str = "purchase", **amounts: str) -> dict:
    args = {key: {"amount": amount, "currency": {"name": "USD"}} for key, amount in amounts.items()}
    return {"name": name, **who(n), "dedup_id": dedup_id, "args": args}


@pytest.fixture(scope="module", autouse=True)
def sdk_installed():
    ensure_sdk()  # npm ci once per lock file; skips without node/npm, fails under CI=true


@pytest.fixture(scope="module")
def chain(client_base) -> Shop:
    """A refers B, B refers C, C refers D, D refers E; each buys (B swaps too): A is at levels 1 to 4 of their
    chains. A (active, EU, audience "a 2") and B (pending, LATAM) are affiliates."""
    shop = Shop(*client_base)
    assert shop.http.put("/projects/config", json=CONFIG).status_code == 200
    for n, fields in ((A, {"region": "EU", "audience": "a 2"}), (B, {"status": "pending", "region": "LATAM"})):
        assert shop.http.post("/affiliates", json={**who(n), **fields}).status_code == 201
    for referrer, referred in ((A, B), (B, C), (C, D), (D, E)):
        shop.refer(referrer, referred)
    events = [event("e", E, value="100"), event("d", D, value="20"), event("c", C, value="8.5", revenue="3"),
              event("b", B, value="1.5"), event("b-swap", B, name="swap", revenue="10")]  # fmt: skip
    assert shop.http.post("/events/batch", json={"events": events}).json() == {"ingested_events": 5}
    shop.http.wait_processed(*(e["dedup_id"] for e in events))
    yield shop
    shop.http.close()


def test_stats_and_paid_volumes_through_the_client(chain):
    a = addr(A)
    results = chain.sdk(
        chain.standard_key,
        # user_identifier_type and conversion_id are not sent by the client; this_month=false goes as "false".
        (
            "getAffiliateStats",
            {
                "user_identifier": a,
                "user_identifier_type": "evm_address",
                "this_month": False,
                "conversion_id": "ignored",
            },
        ),
        ("getAffiliateStats", {"user_identifier": a, **WEEK, "conversion_name": "purchase"}),
        ("getAffiliateStats", {"user_identifier": a, "conversion_external_id": external_id("swap")}),
        ("getAffiliatePaidVolumesByLevel", {"user_identifier": a}),
        ("getAffiliatePaidVolumesByLevel", {"user_identifier": a, "this_month": True}),
        ("getAffiliatePaidVolumesByLevel", {"user_identifier": a, "this_month": True, **WEEK}),
        ("getAffiliateStats", {"user_identifier": addr(C)}),
    )
    stats, purchases, swaps, paid, this_month, mixed, not_affiliate = results
    stats = ok(stats)
    # What the client resolves to is the service's answer, as read over plain HTTP.
    assert stats == chain.read("/affiliate-portal/stats", user_identifier=a)
    assert (stats["user_identifier"], stats["user_identifier_type"]) == (a, "evm_address")
    volumes = [stats[k] for k in ("referred_volume", "r2_volume", "r3_volume", "r4_volume", "multilevel_volume")]
    assert volumes == [1.5, 8.5, 20, 100, 128.5] and stats["total_volume"] == 130
    revenues = [stats[k] for k in ("referred_revenue", "r2_revenue", "r3_revenue", "r4_revenue")]
    assert revenues == [10, 3, 0, 0] and stats["referred_attributions"] == 2 and stats["end_user_volume"] == 0
    # Points: 0.15 (B's), 0.425 (C's), 0.4 (D's), 1 (E's); B's swap paid A 10% of 3 USDC.
    assert stats["total_earnings"] == [{"amount": 0.3, "currency": "USDC"}, {"amount": 1.975, "currency": "point"}]
    assert [stats[f"r{n}_earnings"] for n in (1, 2, 3, 4)] == [[{"amount": 0.3, "currency": "USDC"}], [], [], []]
    assert (stats["referred_users"], stats["active_referrers"], stats["total_referrers"]) == (1, 1, 1)
    assert (stats["status"], stats["region"], len(stats["referral_codes"])) == ("Active", "EU", 1)
    assert stats["current_tier"] == {"id": "base", "name": "Base", "slug": "base", "rank": 1}

    purchases = ok(purchases)
    assert (purchases["referred_volume"], purchases["referred_revenue"], purchases["total_volume"]) == (1.5, 0, 130)
    assert purchases["total_earnings"] == [{"amount": 1.975, "currency": "point"}]
    swaps = ok(swaps)
    assert (swaps["referred_volume"], swaps["referred_revenue"], swaps["referred_attributions"]) == (0, 10, 1)

    paid = ok(paid)
    levels = [[paid[f"payout_eligible_l{n}_{k}"] for k in ("volume", "revenue", "attributions")] for n in (1, 2, 3, 4)]
    assert levels == [[1.5, 10, 2], [8.5, 3, 1], [20, 0, 1], [100, 0, 1]]
    totals = [paid[f"payout_eligible_total_{k}"] for k in ("volume", "revenue", "attributions")]
    assert totals == [130, 13, 5] and paid["user_identifier"] == a
    assert ok(this_month)["payout_eligible_total_volume"] == 130  # sent as this_month=true
    assert "this_month" in failed(mixed, 400)["message"]
    failed(not_affiliate, 404)


def test_tree_breakdown_new_traders_and_total_stats_through_the_client(chain):
    a = addr(A)
    tree, breakdown, new_traders, filtered, everyone, bad = chain.sdk(
        chain.standard_key,
        ("getReferralTree", {"user_identifier": a}),
        (
            "getStatsBreakdown",
            {"user_identifier": a, "group_by": "day", "date_range": "7d", "currency_id": TOKEN["address"]},
        ),
        ("getAffiliateNewTraders", {"user_identifier": a, **WEEK}),
        # Sent as statuses[]=Active&statuses[]=Paused&regions[]=EU&regions[]=LATAM&audiences[]=a+2
        (
            "getAffiliateTotalStats",
            {"statuses": ["Active", "Paused"], "regions": ["EU", "LATAM"], "audiences": ["a 2"]},
        ),
        ("getAffiliateTotalStats", {}),
        ("getAffiliateTotalStats", {"statuses": ["Retired"]}),
    )

    def shape(node: dict) -> tuple:
        return (node["user_identifier"], node["traders"], node["total_volume"], node["total_revenue"],
                [shape(child) for child in node["children"]])  # fmt: skip

    tree = ok(tree)
    e = (addr(E), 1, 100, 0, [])
    d = (addr(D), 2, 120, 0, [e])
    c = (addr(C), 3, 128.5, 3, [d])
    assert shape(tree) == (a, 4, 130, 13, [(addr(B), 4, 130, 13, [c])])
    assert tree["project_affiliate_id"] == f"evm_address:{a}"
    assert tree["children"][0]["project_affiliate_id"] == f"evm_address:{addr(B)}"
    assert tree["children"][0]["children"][0]["project_affiliate_id"] is None  # C is no affiliate

    results = ok(breakdown)["results"]
    assert [row["date"] for row in results] == [(TODAY - timedelta(days=n)).isoformat() for n in range(6, -1, -1)]
    today = results[-1]
    assert [today[k] for k in ("r1_volume", "r2_volume", "r3_volume", "revenue", "attributions", "referred_users")] == [
        1.5, 8.5, 20, 13, 5, 1]  # fmt: skip
    assert (today["earnings"], today["earnings_currency"]) == (0.3, "USDC")

    assert ok(new_traders) == [{"referrer_identifier": a, "total_new_traders": "1"}]  # B: referred and converted

    filtered = ok(filtered)  # A only: B is pending (Paused) in LATAM, but its audience is not "a 2"
    counts = [filtered[k] for k in ("total_affiliates", "active_affiliates", "suspended_affiliates", "total_regions")]
    assert counts == [1, 1, 0, 1] and filtered["total_referred_users"] == 1
    assert (filtered["total_volume"], filtered["total_revenue"], filtered["total_attributions"]) == (1.5, 10, 2)
    assert filtered["total_earnings"] == [{"amount": 0.3, "currency": "USDC"}, {"amount": 1.975, "currency": "point"}]
    everyone = ok(everyone)  # level 1 of A (B's) and of B (C's): each conversion once
    assert (everyone["total_affiliates"], everyone["total_volume"], everyone["total_revenue"]) == (2, 10, 13)
    assert failed(bad, 400)["message"].startswith("statuses must be among")


def test_a_project_sees_only_its_own_affiliates(chain, client_base):
    stranger = Shop(*client_base)
    try:
        stats, totals = run_calls(
            stranger.base_url,
            stranger.standard_key,
            [{"method": "getAffiliateStats", "args": [{"user_identifier": addr(A)}]},
             {"method": "getAffiliateTotalStats", "args": [{}]}],
        )  # fmt: skip
        failed(stats, 404)
        assert ok(totals)["total_affiliates"] == 0 and ok(totals)["total_earnings"] == []
    finally:
        stranger.http.close()
