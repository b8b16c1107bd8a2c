"""API.md §5: on-chain payouts become claim checks; close, claim, history, totals and the project listing."""

import pytest

from tests.conftest import event, evm
from tests.harness import eventually
from tests.test_auth import error_of
from tests.test_payouts import CONFIG
from tests.test_referral_codes import create, user

USDC = {"address": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "chain_id": 1, "name": "USDC", "decimals": 6}
WETH = {"address": "0x4200000000000000000000000000000000000006", "chain_id": 10, "name": "WETH", "decimals": 18}
TOKEN_CONFIG = {
    **CONFIG,
    "conversions": [
        *CONFIG["conversions"],
        {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"}, "currency": USDC,
         "end_user_reward": {"rate": "0.5"}},
        {"event_name": "bridge", "base": {"fixed": "0.001"}, "currency": WETH, "end_user_reward": {"fixed": "0.002"}},
    ],
}  # fmt: skip
AFFILIATE, TRADER = 1, 2
HASH_1, HASH_2 = "0x" + "1" * 64, "0x" + "2" * 64


def swap(dedup_id: str, revenue: str, trader: int = TRADER) -> dict:
    revenue_arg = {"amount": revenue, "currency": {"name": "USD"}}
    return event(dedup_id, user=evm(trader), name="swap", args={"revenue": revenue_arg})


def checks(api, **params) -> dict:
    response = api.get("/claim-checks/rewards-payouts", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def history(api, n: int = TRADER, **params) -> dict:
    response = api.get("/claim-checks/claim-history", params={**user(n), **params})
    assert response.status_code == 200, response.text
    return response.json()


def totals(api, n: int = TRADER, **params) -> dict:
    response = api.get("/claim-checks/totals", params={**user(n), **params})
    assert response.status_code == 200, response.text
    return response.json()


def ids_of(api, n: int = TRADER, **params) -> list[str]:
    return [c["id"] for c in checks(api, **user(n), page_size=100, **params)["results"]]


def close(api, ids: list[str], n: int = TRADER):
    return api.post("/claim-checks/close", json={**user(n), "claim_check_ids": ids})


def claim(api, ids: list[str], tx_hash: str = HASH_1, claimed_at: str = "2026-11-20T10:00:00Z"):
    return api.post("/claim-checks/claims", json={"hash": tx_hash, "claimed_at": claimed_at, "claim_check_ids": ids})


def currency_of(token: dict) -> dict:
    return {"currency_address": token["address"], "currency_chain_id": token["chain_id"],
            "currency_name": token["name"], "currency_decimals": token["decimals"]}  # fmt: skip


@pytest.fixture
def trades(api) -> None:
    """AFFILIATE referred TRADER; TRADER swaps (revenue 100, then 10) and bridges once.
    swap 100: base 30 USDC → TRADER 15 USDC, AFFILIATE 3 USDC (base tier r1 0.1); swap 10: 1.5 and 0.3;
    bridge: TRADER 0.002 WETH, AFFILIATE 0.0001 WETH."""
    api.put("/projects/config", json=TOKEN_CONFIG)
    code = create(api, owner=user(AFFILIATE), quantity=1)[0]["code"]
    api.patch(f"/referral_codes/{code}/use", json=user(TRADER))
    events = [swap("s1", "100"), swap("s2", "10"), event("b1", user=evm(TRADER), name="bridge")]
    assert api.post("/events/batch", json={"events": events}).json() == {"ingested_events": 3}
    api.wait_processed("s1", "s2", "b1")


def test_token_payouts_open_checks_for_every_recipient(api, trades):
    listing = checks(api)
    assert listing["total_count"] == 6 and listing["next_page"] is None
    mine = {_kind(c) for c in listing["results"] if c["user_identifier"] == evm(TRADER)}
    assert mine == {("USDC", "end_user_payout", "15000000"), ("USDC", "end_user_payout", "1500000"),
                    ("WETH", "end_user_payout", "2000000000000000")}  # fmt: skip
    theirs = {_kind(c) for c in listing["results"] if c["user_identifier"] == evm(AFFILIATE)}
    assert theirs == {("USDC", "affiliate_payout", "3000000"), ("USDC", "affiliate_payout", "300000"),
                      ("WETH", "affiliate_payout", "100000000000000")}  # fmt: skip
    first = listing["results"][0]
    assert first["status"] == "open" and first["hash"] is None and first["claimed_at"] is None
    assert first["created_at"].endswith("Z") and first["user_identifier_type"] == "evm_address"
    assert totals(api) == {
        "claimed": [],
        "unclaimed": [{**currency_of(USDC), "amount": "16500000", "status": "unclaimed"},
                      {**currency_of(WETH), "amount": "2000000000000000", "status": "unclaimed"}],
    }  # fmt: skip
    assert api.get("/payouts/summary", params={"currency": "point"}).json() == {"total_payouts": "60"}  # code use only


def test_close_claim_and_history_grouped_by_hash_and_currency(api, trades):
    usdc = ids_of(api, currency_address=USDC["address"])
    weth = ids_of(api, currency_address=WETH["address"])
    closed = close(api, usdc + weth)
    assert closed.status_code == 200 and {c["status"] for c in closed.json()} == {"closed"}
    assert {c["id"] for c in closed.json()} == set(usdc + weth)
    eventually(lambda: _assert_statuses(api, {"closed"}))
    assert history(api) == {"results": [], "total_count": 0, "next_page": None}  # closed checks are not history
    assert claim(api, [usdc[0], weth[0]], HASH_1, "2026-11-20T10:00:00Z").json() == {"claimed": 2}
    assert claim(api, [usdc[1]], HASH_1, "2026-11-20T10:05:00.250Z").json() == {"claimed": 1}
    expected = [
        {"hash": HASH_1, "claimed_at": "2026-11-20T10:05:00.250Z", **currency_of(USDC), "amount": "16500000"},
        {"hash": HASH_1, "claimed_at": "2026-11-20T10:00:00.000Z", **currency_of(WETH), "amount": "2000000000000000"},
    ]
    eventually(lambda: _assert_history(api, expected))
    first_page = history(api, page_size=1)
    assert first_page["total_count"] == 2 and first_page["next_page"] == 2 and first_page["results"] == expected[:1]
    assert history(api, page=2, page_size=1)["next_page"] is None
    assert totals(api)["claimed"] == [
        {**currency_of(USDC), "amount": "16500000", "status": "claimed"},
        {**currency_of(WETH), "amount": "2000000000000000", "status": "claimed"},
    ]
    assert totals(api)["unclaimed"] == []


def test_a_later_hash_comes_first(api, trades):
    usdc = ids_of(api, currency_address=USDC["address"])
    close(api, usdc)
    claim(api, [usdc[0]], HASH_1, "2026-11-01T00:00:00Z")
    claim(api, [usdc[1]], HASH_2, "2026-11-02T00:00:00Z")
    eventually(lambda: _assert_hashes(api, [HASH_2, HASH_1]))


def test_claim_rules_and_idempotence(api, trades):
    usdc = ids_of(api, currency_address=USDC["address"])
    assert "only closed checks" in error_of(claim(api, usdc[:1]), 409)  # still open
    close(api, usdc)
    assert claim(api, usdc).json() == {"claimed": 2}
    assert claim(api, usdc).json() == {"claimed": 2}  # the same hash and ids again: a no-op
    assert "another transaction" in error_of(claim(api, usdc, HASH_2), 409)
    assert "already claimed" in error_of(close(api, usdc[:1]), 409)
    assert close(api, ids_of(api, currency_address=WETH["address"])).status_code == 200
    assert close(api, ids_of(api, currency_address=WETH["address"])).status_code == 200  # closing again: no-op
    error_of(claim(api, ["cc_nope"]), 404)
    eventually(lambda: _assert_history(api, [{"hash": HASH_1, "claimed_at": "2026-11-20T10:00:00.000Z",
                                              **currency_of(USDC), "amount": "16500000"}]))  # fmt: skip


def test_a_failed_change_changes_nothing(api, trades):
    open_ids = ids_of(api)
    error_of(close(api, [open_ids[0], "cc_unknown"]), 404)
    affiliate_check = ids_of(api, AFFILIATE)[0]
    error_of(close(api, [open_ids[1], affiliate_check]), 404)  # not this user's check
    assert close(api, open_ids[:1]).json()[0]["status"] == "closed"  # the listed checks were left open
    eventually(lambda: _assert_equal(ids_of(api, status="closed"), open_ids[:1]))
    assert open_ids[1] in ids_of(api, status="open")


def test_totals_filters(api, trades):
    usdc = ids_of(api, currency_address=USDC["address"])
    close(api, usdc)
    claim(api, usdc[:1])
    eventually(lambda: _assert_equal(len(totals(api, status="claimed")["claimed"]), 1))
    claimed_amount = next(c["amount"] for c in checks(api, **user(TRADER))["results"] if c["id"] == usdc[0])
    assert totals(api, status="claimed") == {
        "claimed": [{**currency_of(USDC), "amount": claimed_amount, "status": "claimed"}],
        "unclaimed": [],
    }
    closed = totals(api, status="closed")
    assert closed["claimed"] == [] and [u["status"] for u in closed["unclaimed"]] == ["closed"]
    assert [(u["currency_name"], u["status"]) for u in totals(api, status="open")["unclaimed"]] == [("WETH", "open")]
    assert {u["currency_name"] for u in totals(api, status="unclaimed")["unclaimed"]} == {"USDC", "WETH"}
    assert totals(api, AFFILIATE, reason="end_user_payout") == {"claimed": [], "unclaimed": []}
    assert len(totals(api, AFFILIATE, reason="affiliate_payout")["unclaimed"]) == 2
    for bad in ({"status": "lost"}, {"reason": "gift"}):
        error_of(api.get("/claim-checks/totals", params={**user(TRADER), **bad}), 400)


def test_project_listing_filters_and_pages(api, trades):
    assert len(ids_of(api, AFFILIATE)) == 3 and len(ids_of(api, TRADER)) == 3
    assert checks(api, currency_address=WETH["address"].upper().replace("0X", "0x"))["total_count"] == 2
    assert checks(api, status="claimed")["total_count"] == 0
    page = checks(api, page_size=4)
    assert (len(page["results"]), page["total_count"], page["next_page"]) == (4, 6, 2)
    created = [c["created_at"] for c in checks(api)["results"]]
    assert created == sorted(created, reverse=True)
    assert checks(api, **{"from": "2999-01-01T00:00:00Z"})["total_count"] == 0
    assert checks(api, to="1999-01-01")["total_count"] == 0
    assert checks(api, **{"from": "0", "to": str(2**41)})["total_count"] == 6
    for bad in ({"status": "lost"}, {"from": "later"}, {"from": "2026-02-01", "to": "2026-01-01"}, {"page_size": 500},
                {"user_identifier": evm(1)}):  # fmt: skip
        error_of(api.get("/claim-checks/rewards-payouts", params=bad), 400)


def test_validation_scopes_and_projects_apart(api, make_api, admin, trades):
    for body in ({"hash": HASH_1, "claim_check_ids": []}, {"claim_check_ids": ["x"]},
                 {"hash": HASH_1, "claimed_at": "soon", "claim_check_ids": ["x"]},
                 {"hash": HASH_1, "claim_check_ids": ["x"], "extra": 1}):  # fmt: skip
        error_of(api.post("/claim-checks/claims", json=body), 400)
    error_of(api.post("/claim-checks/close", json={"claim_check_ids": ["x"]}), 400)
    error_of(api.post("/claim-checks/close", json={**user(TRADER), "claim_check_ids": "x"}), 400)
    error_of(api.get("/claim-checks/claim-history", params={"user_identifier": "nope"}), 400)
    error_of(api.get("/claim-checks/claim-history", params={**user(TRADER), "page_size": 0}), 400)
    standard = make_api()
    error_of(standard.post("/claim-checks/close", json={**user(TRADER), "claim_check_ids": ["x"]}), 403)
    error_of(standard.post("/claim-checks/claims", json={"hash": HASH_1, "claim_check_ids": ["x"]}), 403)
    error_of(standard.get("/claim-checks/rewards-payouts"), 403)
    history_response = standard.get("/claim-checks/claim-history", params=user(TRADER))
    assert history_response.status_code == 200 and history_response.headers["X-RateLimit-Limit"] == "100"
    assert standard.get("/claim-checks/totals", params=user(TRADER)).status_code == 200
    other = make_api("service_role", project_id=admin.project())
    assert checks(other)["total_count"] == 0 and totals(other)["unclaimed"] == []
    error_of(close(other, ids_of(api)), 404)


def _kind(check: dict) -> tuple:
    return check["currency_name"], check["reason"], check["amount"]


def _assert_statuses(api, expected: set[str]) -> None:
    assert {c["status"] for c in checks(api, **user(TRADER))["results"]} == expected


def _assert_history(api, expected: list[dict]) -> None:
    assert history(api) == {"results": expected, "total_count": len(expected), "next_page": None}


def _assert_hashes(api, expected: list[str]) -> None:
    assert [row["hash"] for row in history(api)["results"]] == expected


def _assert_equal(actual, expected) -> None:
    assert actual == expected
