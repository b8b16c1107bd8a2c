"""API.md §1 and §6 end to end: configuration, referral chains, payouts, totals and leaderboards."""

from decimal import Decimal

from tests.conftest import event, evm
from tests.ingest_api.test_referral_codes import create, user
from tests.support.harness import eventually
from tests.web.test_auth import error_of

CONFIG = {
    "default_tier": "base",
    "tiers": [
        {"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.10", "r2": "0.05", "r3": "0.02", "r4": "0.01"}},
        {"id": "gold", "name": "Gold", "rank": 2, "rates": {"r1": "0.20", "r2": "0.10", "r3": "0.05", "r4": "0.02"}},
    ],
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
         "end_user_reward": {"fixed": "10"}},
        {"event_name": "signup", "base": {"fixed": "100"}, "currency": "point", "end_user_reward": {"rate": "0.05"}},
    ],
    "referral_reward": {"referrer": "50", "referred": "10"},
    "campaigns": [{"id": "launch", "event_names": ["signup"], "starts_at": "2026-01-01T00:00:00Z",
                   "ends_at": "2027-01-01T00:00:00Z", "bonus": "5"}],
}  # fmt: skip


def refer(api, referrer: int, referred: int) -> None:
    code = create(api, owner=user(referrer), quantity=1)[0]["code"]
    assert api.patch(f"/referral_codes/{code}/use", json=user(referred)).status_code == 200


def _summary_is(api, total: str) -> None:
    assert api.get("/payouts/summary", params={"currency": "point"}).json() == {"total_payouts": total}


def totals(api, n: int) -> dict:
    response = api.get(f"/payouts/totals/{evm(n)}", params={"identifier_type": "evm_address"})
    assert response.status_code == 200
    return response.json()


def purchase(dedup_id: str, buyer: int, amount: str, **extra) -> dict:
    return event(dedup_id, user=evm(buyer), args={"value": {"amount": amount, "currency": {"name": "USD"}}}, **extra)


def test_config_round_trip_and_validation(api):
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    stored = api.get("/projects/config").json()
    assert stored["tiers"][1]["rates"]["r1"] == "0.20" and stored["default_tier"] == "base"
    assert stored["campaigns"][0]["starts_at"] == "2026-01-01T00:00:00.000Z"
    bad = {**CONFIG, "default_tier": "nope", "tiers": [{"id": "x", "rates": {"r1": "2"}}], "extra": 1}
    message = error_of(api.put("/projects/config", json=bad), 400)
    assert isinstance(message, list) and len(message) >= 4
    assert any("extra" in m for m in message) and any("tiers[0]" in m for m in message)


def test_a_4_level_chain_pays_exactly_base_times_rn_at_each_level(api):
    api.put("/projects/config", json=CONFIG)
    for upper, lower in ((5, 4), (4, 3), (3, 2), (2, 1), (1, 0)):  # 5 referred 4 ... 1 referred 0
        refer(api, upper, lower)
    before = {n: Decimal(totals(api, n)["by_kind"]["affiliate_commission"]) for n in range(6)}
    amount = "1234.567890123456789"
    assert api.post("/events/batch", json={"events": [purchase("p1", 0, amount)]}).json()["ingested_events"] == 1
    api.wait_processed("p1")
    base = Decimal(amount)
    rates = {1: "0.10", 2: "0.05", 3: "0.02", 4: "0.01"}
    for level, rate in rates.items():
        earned = Decimal(totals(api, level)["by_kind"]["affiliate_commission"]) - before[level]
        assert earned == (base * Decimal(rate)).quantize(Decimal("1e-18")), level
    assert Decimal(totals(api, 5)["by_kind"]["affiliate_commission"]) == before[5]  # level 5 earns nothing
    buyer = totals(api, 0)["by_kind"]
    assert (buyer["end_user_reward"], buyer["referral_reward"]) == ("10", "10")  # fixed reward; referred reward


def test_l1_tier_sets_the_rates_and_summary_is_exact(api):
    api.put("/projects/config", json=CONFIG)
    assert api.post("/affiliates", json={**user(1), "tier": "gold"}).status_code == 201
    error_of(api.post("/affiliates", json={**user(1)}), 409)
    error_of(api.post("/affiliates", json={**user(3), "tier": "platinum"}), 400)
    refer(api, 2, 1)
    refer(api, 1, 0)
    api.post("/events/batch", json={"events": [purchase("g1", 0, "0.3")]})
    api.wait_processed("g1")
    assert totals(api, 1)["by_kind"]["affiliate_commission"] == "0.06"  # 0.3 × gold r1
    assert totals(api, 2)["by_kind"]["affiliate_commission"] == "0.03"  # 0.3 × gold r2 (L1's tier)
    # 2×(50+10) referral rewards + 10 end-user + 0.06 + 0.03 commissions. The code uses' referral rewards are written
    # from the project's own partition, the conversion's maybe from another (spread by user): each within moments.
    eventually(lambda: _summary_is(api, "130.09"))
    user0 = totals(api, 0)
    assert user0["total_points"] == "20" and user0["by_kind"]["referral_reward"] == "10"


def test_campaign_bonus_end_user_rate_and_unmatched_events(api):
    api.put("/projects/config", json=CONFIG)
    inside = event("c1", user=evm(7), name="signup", timestamp="2026-06-01T00:00:00Z")
    outside = event("c2", user=evm(8), name="signup", timestamp="2025-06-01T00:00:00Z")
    unmatched = event("c3", user=evm(9), name="page_view")
    api.post("/events/batch", json={"events": [inside, outside, unmatched]})
    api.wait_processed("c1", "c2", "c3")
    assert totals(api, 7)["by_kind"] == {
        "affiliate_commission": "0", "referral_reward": "0", "end_user_reward": "5", "campaign_bonus": "5",
        "rebate": "0",
    }  # fmt: skip
    assert totals(api, 8)["total_points"] == "5"
    assert totals(api, 9)["total_points"] == "0"


def test_summary_requires_point_and_starts_at_zero(api):
    assert api.get("/payouts/summary", params={"currency": "point"}).json() == {"total_payouts": "0"}
    error_of(api.get("/payouts/summary"), 400)
    error_of(api.get("/payouts/summary", params={"currency": "usd"}), 400)
    error_of(api.get(f"/payouts/totals/{evm(1)}"), 400)
    error_of(api.get("/payouts/totals/nope", params={"identifier_type": "evm_address"}), 400)


def test_leaderboards_rank_ties_and_filter(api):
    rule = {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "end_user_reward": {"rate": "1"}}
    config = {"default_tier": None, "tiers": [], "conversions": [rule]}
    assert api.put("/projects/config", json=config).status_code == 200
    amounts = {1: "30", 2: "20", 3: "20", 4: "10"}
    events = [purchase(f"l{n}", n, a, timestamp="2026-03-01T10:30:00.000Z") for n, a in amounts.items()]
    events.append(purchase("late", 4, "100", timestamp="2026-03-02T00:00:00.000Z"))
    api.post("/events/batch", json={"events": events})
    api.wait_processed(*(e["dedup_id"] for e in events))

    board = api.get("/payouts/leaderboard/users", params={"to": "2026-03-01T23:59:59.999Z"}).json()
    assert board["total_results"] == 4 and board["page"] == 1 and board["page_size"] == 25
    ranks = [(r["rank"], r["user_identifier"], r["total_amount"]) for r in board["results"]]
    assert ranks == [(1, evm(1), "30"), (2, evm(2), "20"), (2, evm(3), "20"), (4, evm(4), "10")]
    assert board["results"][0]["address"] == evm(1) and board["results"][0]["total_attributions"] == 1

    alltime = api.get("/payouts/leaderboard/users").json()["results"]
    assert (alltime[0]["user_identifier"], alltime[0]["total_amount"], alltime[0]["total_attributions"]) == (
        evm(4), "110", 2)  # fmt: skip

    edge = api.get("/payouts/leaderboard/users", params={"from": "2026-03-01T10:30:00.000Z",
                                                         "to": "2026-03-01T10:30:00.000Z"}).json()  # fmt: skip
    assert edge["total_results"] == 4
    after = api.get("/payouts/leaderboard/users", params={"from": "2026-03-01T10:30:00.001Z"}).json()
    assert [r["user_identifier"] for r in after["results"]] == [evm(4)]

    day = {"to": "2026-03-01T23:59:59.999Z"}
    page2 = api.get("/payouts/leaderboard/users", params={**day, "page": 2, "page_size": 3}).json()
    assert [r["rank"] for r in page2["results"]] == [4]
    only = {"user_identifier": evm(3), "user_identifier_type": "evm_address", "to": "2026-03-01T23:00:00Z"}
    mine = api.get("/payouts/leaderboard/users", params=only).json()
    assert [(r["rank"], r["user_identifier"]) for r in mine["results"]] == [(2, evm(3))]
    assert api.get("/payouts/leaderboard/payouts").json()["results"] == []
    error_of(api.get("/payouts/leaderboard/users", params={"from": "soon"}), 400)
    error_of(api.get("/payouts/leaderboard/users", params={"page_size": 0}), 400)
