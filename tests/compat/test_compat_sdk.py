"""API.md §7: the published JavaScript client, `@fuul/sdk` (the version pinned in tests/compat/package.json), pointed
at `rewards serve` unchanged. Each call goes through the client's own request code (tests/compat/run.mjs in node),
and what it resolves to is compared with what the server holds, read back over plain HTTP.

Only the client methods that map onto endpoints of API.md §1–6 and work today are here;
docs/fuul-sdk-7.41.0-surface.md lists every method of the client and what it sends.
The client has one base URL: on the embedded shape, the server's; on the production shape, a gateway routing each
path to its service as deploy/gateway.conf does (tests.support.harness.Gateway).
"""

from decimal import Decimal

import pytest

from rewards.domain import signatures
from rewards.domain.tracking import CodeTraffic
from tests.compat.driver import ensure_sdk, run_calls
from tests.domain.test_signatures import ALICE, BOB, sign
from tests.ingest_api.test_claim_checks import SIGNER, SIGNING, recover
from tests.ingest_api.test_tracking import read_traffic, settled
from tests.support.harness import Admin, Api, Gateway, Server, eventually

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
        self.server = server
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

    def refer_code(self, owner: int) -> str:
        created = self.http.post("/referral_codes", json={**who(owner), "quantity": 1})
        assert created.status_code == 201, created.text
        return created.json()[0]["code"]

    def key_with(self, *scopes: str) -> str:
        return Admin(self.server).key(self.project_id, *scopes)

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


@pytest.fixture
def shop(client_base) -> Shop:
    shop = Shop(*client_base)
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


def without_time(board: dict) -> dict:
    """A leaderboard answer without its `calculated_at` (two answers of the same figures differ by it)."""
    return {name: value for name, value in board.items() if name != "calculated_at"}


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
    assert without_time(board) == without_time(held)  # calculated_at: when each answer was computed
    rows = [(r["rank"], r["user_identifier"], r["total_amount"], r["chain_id"]) for r in board["results"]]
    # commissions at r1 = 0.1 of the base (150 and 20); no referral_reward configured. Numbers, as the client declares.
    assert rows == [(1, addr(1), 15, ""), (2, addr(2), 2, "")]
    assert board["calculated_at"].endswith("Z")
    assert board["total_results"] == 2 and board["results"][0]["address"] == addr(1)
    assert board["results"][0]["user_identifier_type"] == EVM and board["results"][0]["total_attributions"] == 2

    page2 = ok(page2)
    assert (page2["page"], page2["page_size"], page2["total_results"]) == (2, 1, 2)
    assert [r["user_identifier"] for r in page2["results"]] == [addr(2)]
    held_mine = shop.read("/payouts/leaderboard/payouts", **who(2))
    assert without_time(ok(mine)) == without_time(ok(mine_old_name)) == without_time(held_mine)
    assert [(r["rank"], r["user_identifier"]) for r in ok(mine)["results"]] == [(2, addr(2))]
    assert ok(windowed)["results"] == [] and ok(windowed)["total_results"] == 0


def test_claim_checks_history_and_totals_through_the_client(shop):
    assert shop.http.put("/projects/config", json=CONFIG).status_code == 200
    no_signer_claimable, no_signer_close = shop.sdk(
        shop.service_key,
        ("getClaimableChecks", who(2)),
        ("closeClaimChecks", {**who(2), "claim_check_ids": ["cc_any"]}),
    )
    assert failed(no_signer_claimable, 409)["message"] == "claim signer not configured"
    failed(no_signer_close, 404)  # without a signer, close works as API.md §5 has it: an unknown check is 404
    assert shop.http.put("/projects/config", json={**CONFIG, **SIGNING}).status_code == 200
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
    # its answer: the signed claim form of each check (the client's ClaimResponse[]), signed by the project's signer
    assert [(f["claim_check_id"], f["to"], f["amount"], recover(f)) for f in ok(closed)] == [
        (first[0], addr(2), "15000000", SIGNER)]  # fmt: skip
    (form,) = ok(closed)
    assert (form["currency"], form["currency_type"], form["reason"], form["token_id"]) == (TOKEN["address"], 1, 1, "0")
    assert isinstance(form["deadline"], int) and form["signatures"][0].startswith("0x")

    def claimable_is_the_closed_one():
        (claimable,) = shop.sdk(shop.standard_key, ("getClaimableChecks", who(2)))  # a read done by POST, camelCase
        assert [(f["claim_check_id"], f["proof"], recover(f)) for f in ok(claimable)] == [
            (first[0], form["proof"], SIGNER)]  # fmt: skip

    eventually(claimable_is_the_closed_one)
    listed, unclaimed, still_open = shop.sdk(
        shop.standard_key,
        ("getClaimChecks", who(2)),
        ("getClaimChecks", {**who(2), "status": "unclaimed"}),
        ("getClaimChecks", {**who(2), "status": "open"}),
    )
    assert ok(listed) == shop.read("/claim-checks", **who(2)) and len(ok(listed)["claim_checks"]) == 2
    by_id = {c["id"]: c for c in ok(listed)["claim_checks"]}
    assert (by_id[first[0]]["status"], by_id[first[0]]["currency_chain_id"], by_id[first[0]]["currency_decimals"]) == (
        "closed", "1", 6)  # fmt: skip
    assert by_id[first[0]]["deadline_seconds"] >= form["deadline"] and by_id[ids[1]]["deadline_seconds"] == 0
    assert len(ok(unclaimed)["claim_checks"]) == 2 and [c["id"] for c in ok(still_open)["claim_checks"]] == ids[1:]
    tx = "0x" + "ab" * 32
    claimed = shop.http.post("/claim-checks/claims", json={"hash": tx, "claimed_at": "2026-11-20T10:00:00Z",
                                                           "claim_check_ids": first})  # fmt: skip
    assert claimed.json() == {"claimed": 1}
    (after_claim,) = shop.sdk(shop.standard_key, ("getClaimableChecks", who(2)))
    assert ok(after_claim) == []  # claimed: no longer claimable, at once

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
    assert ok(empty) == {"claimed": [], "unclaimed": [], "debt": []}  # (debt: API.md §9; the client passes it on)


# -- tracking events (API.md §7): sendPageview, identifyUser, sendEvent ----------------------------------------------

REFERRAL_CONFIG = {**CONFIG, "referral_reward": {"referrer": "50", "referred": "5"}}


@pytest.fixture(params=["embedded", "production"])
def tracked_shop(request, tmp_path):
    """A Shop on a server whose warehouse the test reads afterwards (tests.ingest_api.test_tracking.read_traffic):
    an embedded server of its own, or the production shape behind the gateway."""
    if request.param == "production":
        server = request.getfixturevalue("production_server")
        gateway = Gateway(server)
        shop = Shop(server, gateway.url)
        yield shop
        shop.http.close()
        gateway.close()
        return
    server = Server(tmp_path / "data").start()
    shop = Shop(server, server.url)
    yield shop
    shop.http.close()
    server.stop()


def test_tracking_through_the_client(tracked_shop):
    """A visitor lands on `/home?af=CODE` (a click), connects a wallet (referred by the code's owner) and buys through
    sendEvent, which names no user (the tracking id's is its user): the owner gets the referral reward and the
    commission, the code one click per page viewed and one attribution."""
    shop = tracked_shop
    assert shop.http.put("/projects/config", json=REFERRAL_CONFIG).status_code == 200
    code = shop.refer_code(1)
    browser = {"search": f"?af={code}&source=tw", "pathname": "/home", "origin": "https://app.example",
               "referrer": "https://ref.example/x", "localStorage": {"fuul.tracking_id": "TRK-SDK-1"}}  # fmt: skip
    identify = {"identifier": addr(2), "identifierType": EVM, "signature": "0x" + "5" * 130,
                "message": "Accept referral", "accountChainId": 8453}  # fmt: skip
    purchase = {"value": {"amount": "200", "currency": {"name": "USD"}}}
    calls = [
        ("sendPageview",),
        ("sendPageview",),  # the same page within a minute: the client sends nothing
        ("sendPageview", "/pricing", [shop.project_id]),  # the multi-project form, for this key's project
        ("identifyUser", identify),
        ("sendEvent", "purchase", purchase),
        ("sendPageview", "/other", ["0" * 32]),  # another project: refused
    ]
    results = run_calls(
        shop.base_url, shop.key_with("SendTrackingEvent"),
        [{"method": m, "args": list(args)} for m, *args in calls], browser=browser,
    )  # fmt: skip
    assert [r.get("void") for r in results[:5]] == [True] * 5, results  # each resolves to void
    assert failed(results[5], 403)["message"] == "project_id is not this key's project"

    status = shop.read("/referral_codes/status", **who(2))
    assert (status["referred"], status["code"], status["referrer_identifier"]) == (True, code, addr(1))
    assert [u["identifier"] for u in shop.read(f"/referral_codes/{code}")["used_by"]] == [addr(2)]
    expected = {
        addr(1): {"referral_reward": "50", "affiliate_commission": "20"},
        addr(2): {"referral_reward": "5", "end_user_reward": "10"},
    }
    eventually(lambda: _assert_points(shop, expected))
    assert shop.read("/events/status", **who(2), event_name="purchase") == {"created": True, "paid": True}

    settled(shop.http)
    assert read_traffic(shop.http.server, shop.project_id, [code]) == {code: CodeTraffic(clicks=2, attributions=1)}


def _assert_points(shop: Shop, expected: dict) -> None:
    for identifier, kinds in expected.items():
        by_kind = shop.read(f"/payouts/totals/{identifier}", identifier_type=EVM)["by_kind"]
        assert {kind: amount for kind, amount in by_kind.items() if amount != "0"} == kinds


# -- affiliate codes and referrals (API.md §7; docs/fuul-sdk-7.41.0-surface.md G3, G4) -------------------------------


def _code_figures(code: dict) -> tuple:
    return code["code"], code["uses"], code["clicks"], code["total_users"], code["total_earnings"], code["rebate_rate"]


def test_affiliate_codes_and_referrals_through_the_client(shop):
    assert shop.http.put("/projects/config", json=CONFIG).status_code == 200  # r1 0.1, no referral reward
    signature = "0x" + "5" * 130
    alice = {"userIdentifier": addr(1), "identifierType": EVM, "signature": signature}
    created, again, taken, invalid, unknown, free, free_too, short, available, nowhere = shop.sdk(
        shop.service_key,
        ("createAffiliateCode", {**alice, "code": "Alice_Code", "accountChainId": 8453}),
        ("createAffiliateCode", {**alice, "code": "second_one"}),  # one affiliate code per user
        ("createAffiliateCode", {**alice, "userIdentifier": addr(3), "code": "ALICE_code"}),
        ("createAffiliateCode", {**alice, "userIdentifier": addr(3), "code": "a"}),
        ("getAffiliateInfo", addr(9), EVM),  # not an affiliate: the client's null
        ("isAffiliateCodeFree", "alice_code"),
        ("isAffiliateCodeFree", "free_one"),
        ("isAffiliateCodeFree", "ab"),
        ("isAffiliateCodeAvailable", "ALICE_CODE"),
        ("isAffiliateCodeAvailable", "nowhere"),
    )
    created = ok(created)
    assert (created["code"], created["user_identifier"], created["user_identifier_type"]) == (
        "ALICE_CODE",
        addr(1),
        EVM,
    )
    assert created["id"] == f"{EVM}:{addr(1)}" and created["updated_at"].endswith("Z")
    assert (again["error"]["name"], again["error"]["address"]) == ("AddressInUseError", addr(1))
    assert taken["error"]["name"] == "CodeInUseError"
    assert invalid["error"]["name"] == "ValidationError" and invalid["error"]["errors"] == [
        "code must be 3 to 32 characters of A-Z, a-z, 0-9, _ and -"]  # fmt: skip
    assert ok(unknown) is None
    assert (ok(free), ok(free_too), ok(short), ok(available), ok(nowhere)) == (False, True, False, True, False)
    (forbidden,) = shop.sdk(
        shop.standard_key, ("createAffiliateCode", {**alice, "userIdentifier": addr(4), "code": "std"})
    )
    assert forbidden["error"]["name"] == "Error" and "service_role" in forbidden["error"]["message"]

    (used,) = shop.sdk(shop.standard_key, ("useReferralCode", {"code": "alice_code", **who(2), "signature": signature,
                                                                 "signature_message": "I accept"}))  # fmt: skip
    assert ok(used) is None
    value = {"amount": "100", "currency": {"name": "USD"}}
    events = [{**who(2), "name": "purchase", "dedup_id": "p1", "args": {"value": value}}]
    assert shop.http.post("/events/batch", json={"events": events}).json() == {"ingested_events": 1}
    shop.http.wait_processed("p1")

    def affiliate(expected: tuple) -> dict:
        (found,) = shop.sdk(shop.standard_key, ("getAffiliateInfo", addr(1), EVM))
        found = ok(found)
        assert [_code_figures(c) for c in found["codes"]] == [expected]
        return found

    info = eventually(lambda: affiliate(("ALICE_CODE", 1, 0, 1, 10, None)))  # the commission: 0.1 of 100
    assert (info["code"], info["uses"], info["total_users"], info["total_earnings"]) == ("ALICE_CODE", 1, 1, 10)
    assert (info["name"], info["user_identifier"], info["region"]) == ("Alice_Code", addr(1), "")
    assert info["current_tier"] == {"id": "base", "name": "Base", "slug": "base", "rank": 1}
    (deprecated,) = shop.sdk(shop.standard_key, ("getAffiliateCode", addr(1), EVM))
    assert ok(deprecated) == info

    renamed, rebated = shop.sdk(
        shop.service_key,
        ("updateAffiliateCode", {**alice, "code": "Alice_Two"}),
        ("updateRebateRate", {**alice, "code": "alice_two", "rebateRate": 0.2}),
    )
    assert ok(renamed) is None and ok(rebated) is None
    eventually(lambda: affiliate(("ALICE_TWO", 1, 0, 1, 10, 0.2)))  # the same code: its figures stay

    # The rebate: 0.2 of each level-1 commission through the code goes to the referred user.
    events = [{**who(2), "name": "purchase", "dedup_id": "p2", "args": {"value": {**value, "amount": "55.55"}}}]
    assert shop.http.post("/events/batch", json={"events": events}).json() == {"ingested_events": 1}
    shop.http.wait_processed("p2")
    commission = Decimal("5.555")  # 0.1 of 55.55
    alice_points = shop.read(f"/payouts/totals/{addr(1)}", identifier_type=EVM)["by_kind"]
    bob_points = shop.read(f"/payouts/totals/{addr(2)}", identifier_type=EVM)["by_kind"]
    kept, rebate = Decimal(alice_points["affiliate_commission"]) - 10, Decimal(bob_points["rebate"])
    assert (kept, rebate) == (Decimal("4.444"), Decimal("1.111")) and kept + rebate == commission
    assert bob_points["end_user_reward"] == "20" and alice_points["rebate"] == "0"
    eventually(lambda: affiliate(("ALICE_TWO", 1, 0, 1, 14.444, 0.2)))

    referrer, listed = shop.sdk(shop.standard_key, ("getUserReferrer", who(2)), ("listUserReferralCodes", who(1)))
    assert ok(referrer) == {
        "user_identifier": addr(2), "user_identifier_type": EVM, "referrer_identifier": addr(1),
        "referrer_identifier_type": EVM, "referrer_name": "Alice_Code", "referrer_code": "ALICE_TWO",
        "referrer_codes": ["ALICE_TWO"], "referrer_user_rebate_rate": 0.2,
    }  # fmt: skip
    failed(listed, 403)  # listing needs referral_codes:read
    removal = {"code": "alice_code", **who(2), "referrer_identifier": addr(1), "referrer_identifier_type": EVM}
    removed, after, not_again = shop.sdk(
        shop.service_key,
        ("deleteReferral", {**removal, "signature": signature, "signature_message": "remove", "chain_id": 8453}),
        ("getUserReferrer", who(2)),
        ("deleteReferral", removal),  # removed already
    )
    assert ok(removed) is None
    assert ok(after) == {"user_identifier": addr(2), "user_identifier_type": EVM, "referrer_identifier": None,
                         "referrer_identifier_type": None, "referrer_name": None, "referrer_code": None,
                         "referrer_codes": [], "referrer_user_rebate_rate": None}  # fmt: skip
    assert failed(not_again, 404)["message"] == "Referral not found"

    def listing() -> None:
        (codes,) = shop.sdk(shop.read_key, ("listUserReferralCodes", who(1)))
        [code] = ok(codes)["results"]
        # the removed referral is counted out of the code's users; what it earned stays
        assert _code_figures(code) == ("ALICE_TWO", 1, 0, 0, 14.444, 0.2)
        assert isinstance(code["clicks"], int) and isinstance(code["total_earnings"], float)

    eventually(listing)


def test_signature_verification_through_the_client(shop):
    """With the project verifying signatures (API.md §7), the client's own error types reach the caller: a forged
    signature is its InvalidSignatureError; a wallet's real one (EIP-191, signed here) goes through."""
    assert shop.http.put("/projects/config", json={**CONFIG, "verify_signatures": True}).status_code == 200
    alice = {"userIdentifier": ALICE.address.lower(), "identifierType": EVM}
    creating = signatures.creating_code_message(shop.project_id, "signed").text
    forged, created = shop.sdk(
        shop.service_key,
        ("createAffiliateCode", {**alice, "code": "signed", "signature": sign(BOB, "I confirm")}),
        ("createAffiliateCode", {**alice, "code": "signed", "signature": sign(ALICE, creating)}),
    )  # fmt: skip
    assert forged["error"]["name"] == "InvalidSignatureError"
    assert ok(created)["code"] == "SIGNED"
    bob = {"user_identifier": BOB.address.lower(), "user_identifier_type": EVM}
    message = signatures.using_code_message(shop.project_id, "signed").text
    unsigned, used = shop.sdk(
        shop.standard_key,
        ("useReferralCode", {"code": "signed", **bob, "signature": "0x00", "signature_message": message}),
        ("useReferralCode", {"code": "signed", **bob, "signature": sign(BOB, message), "signature_message": message}),
    )
    assert failed(unsigned, 400)["message"] == "Invalid signature"  # useReferralCode lets the AxiosError through
    assert ok(used) is None
    assert shop.read("/referral_codes/status", **bob)["code"] == "SIGNED"
