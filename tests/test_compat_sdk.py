"""API.md §7: the published JavaScript client, `@fuul/sdk` (the version pinned in tests/compat/package.json), pointed
at `rewards serve` unchanged. Each call goes through the client's own request code (tests/compat/run.mjs in node),
and what it resolves to is compared with what the server holds, read back over plain HTTP.

Only the client methods that map onto endpoints of API.md §1–6 and work today are here;
docs/fuul-sdk-7.41.0-surface.md lists every method of the client and what it sends.
The client has one base URL: on the embedded shape, the server's; on the production shape, a gateway routing each
path to its service as deploy/gateway.conf does (tests.harness.Gateway).
"""

from decimal import Decimal

import pytest

from tests.compat.driver import ensure_sdk, run_calls
from tests.harness import Admin, Api, Gateway

EVM = "evm_address"
TOKEN = {"address": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "chain_id": 1, "name": "USDC", "decimals": 6}
CONFIG = {
    "default_tier": "base",
    "tiers": [
        {"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0.05", "r3": "0.02", "r4": "0.01"}},
    ],
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
         "end_user_reward": {"fixed": "10"}},
        {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"}, "currency": TOKEN,
         "end_user_reward": {"rate": "0.5"}},
    ],
}  # fmt: skip


def addr(n: int) -> str:
    return f"0x{n:040x}"


def who(n: int) -> dict:
    return {"user_identifier": addr(n), "user_identifier_type": EVM}


class Shop:
    """One fresh project on the embedded server, its keys, and a plain HTTP client to set things up and read back."""

    def __init__(self, server, base_url: str):
        admin = Admin(server)
        self.project_id = admin.project()
        self.service_key = admin.key(self.project_id, "service_role")
        self.read_key = admin.key(self.project_id, "referral_codes:read")
        self.standard_key = admin.key(self.project_id)
        self.http = Api(server, self.service_key, self.project_id)
        self.base_url = f"{base_url}/api/v1"  # what Fuul.init({baseApiUrl}) takes: the client appends paths only

    def sdk(self, key: str, *calls: tuple) -> list[dict]:
        """Run `(method, *args)` calls through the client with `key`, in one node process."""
        return run_calls(self.base_url, key, [{"method": m, "args": list(args)} for m, *args in calls])

    def read(self, path: str, **params) -> dict | list:
        response = self.http.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()

    def refer(self, referrer: int, referred: int) -> str:
        created = self.http.post("/referral_codes", json={**who(referrer), "quantity": 1})
        assert created.status_code == 201, created.text
        code = created.json()[0]["code"]
        used = self.http.patch(f"/referral_codes/{code}/use", json=who(referred))
        assert used.status_code == 200, used.text
        return code


def ok(result: dict):
    assert result["ok"], result
    return result["value"]


def failed(result: dict, status: int) -> dict:
    """The AxiosError the client rejects with: its status, and the service's error body as the client got it."""
    assert not result["ok"], result
    error = result["error"]
    assert error["name"] == "AxiosError" and error["status"] == status, error
    assert error["body"]["statusCode"] == status and isinstance(error["body"]["error"], str), error
    return error["body"]


@pytest.fixture(scope="module", autouse=True)
def sdk_installed():
    ensure_sdk()  # npm ci once per lock file; skips without node/npm, fails under CI=true


@pytest.fixture(scope="module", params=["embedded", "production"])
def base(request):
    """A shape's server and the one base URL the client is given."""
    server = request.getfixturevalue(f"{request.param}_server")
    if request.param == "embedded":
        yield server, server.url
        return
    gateway = Gateway(server)
    yield server, gateway.url
    gateway.close()


@pytest.fixture
def shop(base) -> Shop:
    shop = Shop(*base)
    yield shop
    shop.http.close()


def test_referral_codes_through_the_client(shop):
    owner = who(1)
    (generated,) = shop.sdk(
        shop.service_key,
        ("generateReferralCodes", {**owner, "quantity": 3, "max_uses": 2}),  # sent in the query string, no body
    )
    generated = ok(generated)
    assert len(generated) == 3 and all(r["max_uses"] == 2 and r["remaining_uses"] == 2 for r in generated)

    code = generated[0]["code"]
    unlimited, limited, defaulted, listed, one, lower, status_before = shop.sdk(  # in this order, in one process
        shop.service_key,
        ("updateReferralCode", {"code": code, "max_uses": None}),
        ("updateReferralCode", {"code": generated[1]["code"], "max_uses": 7}),
        ("generateReferralCodes", owner),  # quantity omitted: the service's default
        ("listUserReferralCodes", {**owner, "page": 1, "page_size": 100}),
        ("getReferralCode", {"code": code}),
        ("getReferralCode", {"code": code.lower()}),
        ("getReferralStatus", who(2)),
    )
    assert len(ok(defaulted)) == 5 and all(r["max_uses"] is None for r in ok(defaulted))

    listed = ok(listed)
    held = shop.read("/referral_codes", **owner, page_size=100)
    assert listed == held and listed["count"] == 8 and listed["next_page"] is None
    assert {r["code"] for r in listed["results"]} == {r["code"] for r in generated + ok(defaulted)}

    assert ok(one) == ok(lower) == shop.read(f"/referral_codes/{code}") and ok(one)["available"] is True
    assert ok(unlimited) is None and ok(limited) is None  # the client resolves PATCH to void
    assert shop.read(f"/referral_codes/{code}")["max_uses"] is None
    assert shop.read(f"/referral_codes/{generated[1]['code']}")["max_uses"] == 7
    assert ok(status_before) == {"referred": False}

    # The client's use: the user in the query string, the signature in the body (both read, API.md §7).
    proof = {"signature": "0x" + "5" * 130, "signature_message": "I accept the referral", "chain_id": 8453}
    (used,) = shop.sdk(shop.standard_key, ("useReferralCode", {"code": code, **who(2), **proof}))
    assert ok(used) is None  # resolved: void
    status, after, listed_by_reader, again = shop.sdk(
        shop.standard_key,
        ("getReferralStatus", who(2)),
        ("getReferralCode", {"code": code}),
        ("listUserReferralCodes", owner),
        ("useReferralCode", {"code": code, **who(2), **proof}),
    )
    assert failed(again, 409)["message"] == "User has already been referred"
    status = ok(status)
    assert status == shop.read("/referral_codes/status", **who(2))
    assert (status["referred"], status["code"], status["referrer_identifier"]) == (True, code, addr(1))
    assert status["referrer_identifier_type"] == EVM
    after = ok(after)
    assert after["uses"] == after["current_uses"] == 1
    assert after["used_by"] == [{"identifier": addr(2), "identifier_type": EVM, "used_at": status["referred_at"]}]
    failed(listed_by_reader, 403)  # listing needs referral_codes:read
    (read_listing,) = shop.sdk(shop.read_key, ("listUserReferralCodes", {**owner, "page_size": 5}))
    assert ok(read_listing) == shop.read("/referral_codes", **owner, page_size=5)
    assert ok(read_listing)["next_page"] == 2


def test_errors_reach_the_caller_as_the_client_reports_them(shop):
    unknown, forbidden, needs_service, bad_identifier, bad_type = shop.sdk(
        shop.standard_key,
        ("getReferralCode", {"code": "NOPE123"}),
        ("generateReferralCodes", who(1)),  # service_role only
        ("updateReferralCode", {"code": "NOPE123", "max_uses": 3}),
        ("getReferralStatus", {"user_identifier": "not-an-address", "user_identifier_type": EVM}),
        ("getClaimHistory", {"user_identifier": addr(1), "user_identifier_type": "no_such_type"}),
    )
    assert failed(unknown, 404)["error"] == "Not Found"
    failed(forbidden, 403)
    failed(needs_service, 403)
    failed(bad_identifier, 400)
    failed(bad_type, 400)

    quantity, max_uses, missing = shop.sdk(
        shop.service_key,
        ("generateReferralCodes", {**who(1), "quantity": 51}),
        ("generateReferralCodes", {**who(1), "max_uses": 0}),
        ("listUserReferralCodes", who(9)),  # a user with no codes
    )
    assert "quantity" in str(failed(quantity, 400)["message"])
    assert "max_uses" in str(failed(max_uses, 400)["message"])
    failed(missing, 404)

    (unauthorized,) = run_calls(shop.base_url, "not-a-key", [{"method": "getReferralCode", "args": [{"code": "X"}]}])
    failed(unauthorized, 401)


def test_payouts_leaderboard_through_the_client(shop):
    assert shop.http.put("/projects/config", json=CONFIG).status_code == 200
    shop.refer(1, 3)  # 1 refers 3 and 4, 2 refers 5: commissions rank the affiliates
    shop.refer(1, 4)
    shop.refer(2, 5)
    value = {"amount": "100", "currency": {"name": "USD"}}
    events = [
        {**who(n), "name": "purchase", "dedup_id": f"p{n}", "args": {"value": {**value, "amount": amount}}}
        for n, amount in ((3, "100"), (4, "50"), (5, "20"))
    ]
    assert shop.http.post("/events/batch", json={"events": events}).json() == {"ingested_events": 3}
    shop.http.wait_processed("p3", "p4", "p5")

    board, page2, mine, mine_old_name, windowed = shop.sdk(
        shop.standard_key,
        ("getPayoutsLeaderboard", {"page": 1, "page_size": 10}),
        ("getPayoutsLeaderboard", {"page": 2, "page_size": 1}),
        ("getPayoutsLeaderboard", {"user_identifier": addr(2), "identifier_type": EVM}),  # sent as user_identifier_type
        ("getPayoutsLeaderboard", {"user_identifier": addr(2), "user_identifier_type": EVM}),
        ("getPayoutsLeaderboard", {"from": "2000-01-01T00:00:00Z", "to": "2000-01-02T00:00:00Z"}),
    )
    board = ok(board)
    held = shop.read("/payouts/leaderboard/payouts", page=1, page_size=10)
    assert board == held
    rows = [(r["rank"], r["user_identifier"], Decimal(str(r["total_amount"]))) for r in board["results"]]
    # commissions at r1 = 0.1 of the base (150 and 20); no referral_reward configured
    assert rows == [(1, addr(1), Decimal("15")), (2, addr(2), Decimal("2"))]
    assert board["total_results"] == 2 and board["results"][0]["address"] == addr(1)
    assert board["results"][0]["user_identifier_type"] == EVM and board["results"][0]["total_attributions"] == 2

    page2 = ok(page2)
    assert (page2["page"], page2["page_size"], page2["total_results"]) == (2, 1, 2)
    assert [r["user_identifier"] for r in page2["results"]] == [addr(2)]
    assert ok(mine) == ok(mine_old_name) == shop.read("/payouts/leaderboard/payouts", **who(2))
    assert [(r["rank"], r["user_identifier"]) for r in ok(mine)["results"]] == [(2, addr(2))]
    assert ok(windowed)["results"] == [] and ok(windowed)["total_results"] == 0


def test_claim_checks_history_and_totals_through_the_client(shop):
    assert shop.http.put("/projects/config", json=CONFIG).status_code == 200
    shop.refer(1, 2)
    revenue = {"amount": "100", "currency": {"name": "USD"}}
    events = [{**who(2), "name": "swap", "dedup_id": f"s{i}", "args": {"revenue": revenue}} for i in (1, 2)]
    assert shop.http.post("/events/batch", json={"events": events}).json() == {"ingested_events": 2}
    shop.http.wait_processed("s1", "s2")

    checks = shop.read("/claim-checks/rewards-payouts", **who(2), page_size=100)["results"]
    assert len(checks) == 2  # base 30 USDC per swap: the trader's end-user reward is 15 USDC each
    ids = [c["id"] for c in checks]
    first = ids[:1]
    # The client sends the user in camelCase (userIdentifier, userIdentifierType); its answer is the service's.
    (closed,) = shop.sdk(shop.service_key, ("closeClaimChecks", {**who(2), "claim_check_ids": first}))
    assert [(c["id"], c["status"]) for c in ok(closed)] == [(first[0], "closed")]
    tx = "0x" + "ab" * 32
    claimed = shop.http.post("/claim-checks/claims", json={"hash": tx, "claimed_at": "2026-11-20T10:00:00Z",
                                                           "claim_check_ids": first})  # fmt: skip
    assert claimed.json() == {"claimed": 1}

    history, history_page2, totals, empty = shop.sdk(
        shop.standard_key,
        ("getClaimHistory", {**who(2), "page": 1, "page_size": 10}),
        ("getClaimHistory", {**who(2), "page": 2, "page_size": 10}),
        ("getClaimCheckTotals", who(2)),
        ("getClaimCheckTotals", who(7)),
    )
    history = ok(history)
    assert history == shop.read("/claim-checks/claim-history", **who(2), page=1, page_size=10)
    assert history["total_count"] == 1 and history["next_page"] is None
    (row,) = history["results"]
    assert (row["hash"], row["claimed_at"], row["amount"]) == (tx, "2026-11-20T10:00:00.000Z", "15000000")
    assert (row["currency_address"], row["currency_name"], row["currency_decimals"]) == (
        TOKEN["address"], TOKEN["name"], TOKEN["decimals"])  # fmt: skip
    assert str(row["currency_chain_id"]) == str(TOKEN["chain_id"])
    assert ok(history_page2)["results"] == [] and ok(history_page2)["total_count"] == 1

    totals = ok(totals)
    assert totals == shop.read("/claim-checks/totals", **who(2))
    assert [t["amount"] for t in totals["claimed"]] == ["15000000"]
    assert [t["amount"] for t in totals["unclaimed"]] == ["15000000"]
    assert totals["claimed"][0]["currency_address"] == TOKEN["address"]
    assert ok(empty) == {"claimed": [], "unclaimed": []}
