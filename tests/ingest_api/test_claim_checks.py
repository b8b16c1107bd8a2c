"""API.md §5: on-chain payouts become claim checks; close, claim, history, totals and the project listing. §7: a user's
checks (GET /claim-checks) and the signed claim forms of close and POST /claim-checks/claim."""

import sqlite3
import subprocess
import sys
import time

import pytest
from cryptography.fernet import Fernet
from eth_account import Account
from eth_account.messages import encode_typed_data

from tests.conftest import event, evm
from tests.ingest_api.test_referral_codes import create, user
from tests.query_api.test_payouts import CONFIG
from tests.support.harness import Admin, Api, Server, eventually, stop_processes, wait_healthy
from tests.web.test_auth import error_of

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
SIGNER_KEY = "0x" + "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
SIGNER = Account.from_key(SIGNER_KEY).address
CONTRACT = "0x" + "c1" * 20
SIGNING = {"claim_contract_address": CONTRACT, "claim_signer_key": SIGNER_KEY}


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
    assert api.put("/projects/config", json={**TOKEN_CONFIG, **SIGNING}).status_code == 200
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
        "debt": [],
    }  # fmt: skip
    assert api.get("/payouts/summary", params={"currency": "point"}).json() == {"total_payouts": "60"}  # code use only


def test_close_claim_and_history_grouped_by_hash_and_currency(api, trades):
    usdc = ids_of(api, currency_address=USDC["address"])
    weth = ids_of(api, currency_address=WETH["address"])
    closed = close(api, usdc + weth)
    assert closed.status_code == 200 and {recover(form) for form in closed.json()} == {SIGNER}  # signed forms
    assert [form["claim_check_id"] for form in closed.json()] == usdc + weth
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
    assert close(api, open_ids[:1]).json()[0]["claim_check_id"] == open_ids[0]  # the listed checks were left open
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
        "debt": [],
    }
    closed = totals(api, status="closed")
    assert closed["claimed"] == [] and [u["status"] for u in closed["unclaimed"]] == ["closed"]
    assert [(u["currency_name"], u["status"]) for u in totals(api, status="open")["unclaimed"]] == [("WETH", "open")]
    assert {u["currency_name"] for u in totals(api, status="unclaimed")["unclaimed"]} == {"USDC", "WETH"}
    assert totals(api, AFFILIATE, reason="end_user_payout") == {"claimed": [], "unclaimed": [], "debt": []}
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
    assert other.put("/projects/config", json={"default_tier": None, "tiers": [], **SIGNING}).status_code == 200
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


# -- §7: a user's checks, and the signed claim forms ---------------------------------------------------------------


def recover(form: dict) -> str:
    """Who signed a form, as a contract finds out: the typed data rebuilt from the form's own fields
    (docs/security.md, "Signed claim checks"), on the form's chain, and the signer recovered from its signature."""
    document = {
        "types": {
            "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                             {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"}],
            "Claim": [{"name": n, "type": t} for n, t in (
                ("projectAddress", "address"), ("to", "address"), ("currency", "address"), ("currencyType", "uint8"),
                ("amount", "uint256"), ("reason", "uint8"), ("tokenId", "uint256"), ("deadline", "uint256"),
                ("proof", "bytes32"))],
        },
        "primaryType": "Claim",
        "domain": {"name": "Rewards Claim", "version": "1", "chainId": form["chain_id"],
                   "verifyingContract": form["project_address"]},
        "message": {"projectAddress": form["project_address"], "to": form["to"], "currency": form["currency"],
                    "currencyType": form["currency_type"], "amount": int(form["amount"]), "reason": form["reason"],
                    "tokenId": int(form["token_id"]), "deadline": form["deadline"], "proof": form["proof"]},
    }  # fmt: skip
    (signature,) = form["signatures"]
    return Account.recover_message(encode_typed_data(full_message=document), signature=signature)


def claimable(api, n: int = TRADER, camel: bool = True) -> list[dict]:
    body = {"userIdentifier": evm(n), "userIdentifierType": "evm_address"} if camel else user(n)
    response = api.post("/claim-checks/claim", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def user_checks(api, n: int = TRADER, **params) -> list[dict]:
    response = api.get("/claim-checks", params={**user(n), **params})
    assert response.status_code == 200, response.text
    return response.json()["claim_checks"]


def test_a_users_checks_in_the_clients_shape(api, make_api, trades):
    mine = user_checks(make_api())  # a standard key reads them
    assert [c["id"] for c in mine] == ids_of(api)  # newest first, as the project listing
    usdc = next(c for c in mine if c["currency_name"] == "USDC")
    assert usdc == {"id": usdc["id"], "currency_address": USDC["address"], "currency_chain_id": "1",
                    "currency_name": "USDC", "currency_decimals": 6, "reason": "end_user_payout",
                    "amount": usdc["amount"], "status": "open", "deadline_seconds": 0,
                    "created_at": usdc["created_at"]}  # fmt: skip
    assert usdc["created_at"].endswith("Z") and usdc["amount"] in ("15000000", "1500000")
    close(api, [usdc["id"]])
    eventually(lambda: _assert_equal([c["id"] for c in user_checks(api, status="closed")], [usdc["id"]]))
    (closed,) = user_checks(api, status="closed")
    assert closed["deadline_seconds"] > time.time() + 24 * 3600  # the deadline a form signed now carries
    assert len(user_checks(api, status="unclaimed")) == 3 and len(user_checks(api, status="open")) == 2
    assert user_checks(api, status="claimed") == [] and user_checks(api, 9) == []
    claim(api, [usdc["id"]])
    eventually(lambda: _assert_equal([c["id"] for c in user_checks(api, status="claimed")], [usdc["id"]]))
    assert user_checks(api, status="claimed")[0]["deadline_seconds"] == 0
    for bad in ({"status": "lost"}, {"user_identifier_type": "email"}, {"user_identifier": "nope"}):
        error_of(api.get("/claim-checks", params={**user(TRADER), **bad}), 400)
    error_of(api.get("/claim-checks"), 400)


def test_claimable_checks_are_signed_by_the_projects_signer(api, make_api, trades):
    standard = make_api()
    assert claimable(standard) == []  # nothing closed yet
    usdc = ids_of(api, currency_address=USDC["address"])
    forms = close(api, usdc).json()
    assert [f["claim_check_id"] for f in forms] == usdc and {recover(f) for f in forms} == {SIGNER}
    amounts = {c["id"]: c["amount"] for c in checks(api, **user(TRADER))["results"]}
    for form in forms:
        assert form["project_address"] == CONTRACT and form["to"] == evm(TRADER) and form["chain_id"] == 1
        assert (form["currency"], form["currency_type"], form["reason"], form["token_id"]) == (
            USDC["address"], 1, 1, "0")  # fmt: skip
        assert form["amount"] == amounts[form["claim_check_id"]]
        assert form["deadline"] > time.time() + 24 * 3600 and form["proof"].startswith("0x")
    eventually(lambda: _assert_equal(sorted(f["claim_check_id"] for f in claimable(standard)), sorted(usdc)))
    again = claimable(standard, camel=False)  # snake_case too
    assert {recover(f) for f in again} == {SIGNER} and {f["proof"] for f in again} == {f["proof"] for f in forms}
    assert claimable(api, AFFILIATE) == []  # the affiliate's checks are still open
    claim(api, usdc[:1])  # the state store says so at once, whatever the warehouse shows yet
    assert [f["claim_check_id"] for f in claimable(standard)] == usdc[1:]
    in_query = standard.post("/claim-checks/claim", params=user(TRADER))  # the fields in the query string
    assert in_query.status_code == 200 and [f["claim_check_id"] for f in in_query.json()] == usdc[1:]
    assert in_query.headers["X-RateLimit-Limit"] == "100"
    email = {"userIdentifier": "bob@example.com", "userIdentifierType": "email"}
    assert standard.post("/claim-checks/claim", json=email).json() == []  # no EVM contract pays an email
    error_of(standard.post("/claim-checks/claim", json={"userIdentifier": evm(TRADER)}), 400)
    error_of(standard.post("/claim-checks/claim", json={**user(TRADER), "extra": 1}), 400)


def test_without_a_signer_nothing_is_signed_and_close_answers_the_checks_as_before(api, trades):
    assert api.put("/projects/config", json={**TOKEN_CONFIG, "claim_signer_key": None}).status_code == 200
    open_ids = ids_of(api)
    body = {"userIdentifier": evm(TRADER), "userIdentifierType": "evm_address"}
    assert error_of(api.post("/claim-checks/claim", json=body), 409) == "claim signer not configured"
    assert "claim_signer_address" not in api.get("/projects/config").json()
    closed = close(api, open_ids)  # API.md §5: the checks, closed; no form without a signer
    assert closed.status_code == 200
    assert [(c["id"], c["status"]) for c in closed.json()] == [(i, "closed") for i in open_ids]
    assert all("signatures" not in c for c in closed.json())
    assert api.put("/projects/config", json={**TOKEN_CONFIG, **SIGNING}).status_code == 200
    assert [f["claim_check_id"] for f in close(api, open_ids).json()] == open_ids  # a signer: the signed forms


def test_a_check_no_evm_contract_can_pay_closes_with_an_unsigned_form(api, trades):
    bob = {"user_identifier": "bob@example.com", "user_identifier_type": "email"}
    revenue = {"amount": "10", "currency": {"name": "USD"}}
    swapped = api.post("/events/batch", json={"events": [{**bob, "name": "swap", "dedup_id": "bob-1",
                                                          "args": {"revenue": revenue}}]})  # fmt: skip
    assert swapped.status_code == 200, swapped.text
    api.wait_processed("bob-1")
    (bobs,) = [c["id"] for c in checks(api, **bob)["results"]]
    (form,) = api.post("/claim-checks/close", json={**bob, "claim_check_ids": [bobs]}).json()  # closed, as §5 has it
    assert (form["claim_check_id"], form["to"], form["amount"]) == (bobs, "bob@example.com", "1500000")
    assert (form["signatures"], form["deadline"]) == ([], 0)  # unsigned: a claim pays an EVM address
    assert api.post("/claim-checks/claim", json=bob).json() == []
    eventually(lambda: _assert_equal([c["deadline_seconds"] for c in user_checks_of(api, bob)], [0]))


def user_checks_of(api, who: dict) -> list[dict]:
    return api.get("/claim-checks", params={**who, "status": "closed"}).json()["claim_checks"]


def test_the_signer_key_is_write_only(api):
    config = {"default_tier": None, "tiers": [], "claim_contract_address": CONTRACT.upper().replace("0X", "0x")}
    put = api.put("/projects/config", json={**config, "claim_signer_key": SIGNER_KEY})
    assert put.status_code == 200 and SIGNER_KEY[2:] not in put.text.lower()
    expected = {"tiers": [], "conversions": [], "campaigns": [], "claim_contract_address": CONTRACT,
                "claim_signer_address": SIGNER.lower(), "verify_signatures": False,
                "volume_currency": {"name": "USD"}, "caps": [], "budgets": [], "public_claimable_rewards": True,
                "require_acceptance": False}  # fmt: skip
    assert put.json() == expected
    shown = api.get("/projects/config")
    assert shown.json() == expected and SIGNER_KEY[2:] not in shown.text.lower()
    sent_back = {**shown.json(), "default_tier": None}  # as read (GET leaves out a null default_tier)
    assert api.put("/projects/config", json=sent_back).json() == expected  # claim_signer_address ignored, signer kept
    assert api.put("/projects/config", json=config).json()["claim_signer_address"] == SIGNER.lower()
    wrong_keys = [SIGNER_KEY[:-1], SIGNER_KEY + "00", SIGNER_KEY.replace("4c", "zz"), "0x" + "f" * 64, 7, [SIGNER_KEY]]
    for bad in wrong_keys:
        refused = api.put("/projects/config", json={**config, "claim_signer_key": bad})
        assert error_of(refused, 400) == "claim_signer_key must be a secp256k1 private key: 64 hex digits, 0x optional"
        assert SIGNER_KEY[2 : 66 - 4] not in refused.text.lower()
    both = api.put("/projects/config", json={"tiers": "x", "claim_signer_key": SIGNER_KEY, "extra": SIGNER_KEY})
    messages = error_of(both, 400)
    assert "default_tier is required" in messages and "property extra should not exist" in messages
    assert SIGNER_KEY[2:] not in both.text.lower()  # a valid key beside a wrong document: never echoed
    not_json = api.put("/projects/config", content=b'{"claim_signer_key": "' + SIGNER_KEY.encode() + b'"',
                       headers={"Content-Type": "application/json"})  # fmt: skip
    assert SIGNER_KEY[2:] not in error_of(not_json, 400).lower()
    assert api.get("/projects/config").json()["claim_signer_address"] == SIGNER.lower()  # refused PUTs kept it
    removed = api.put("/projects/config", json={**config, "claim_signer_key": None})
    assert "claim_signer_address" not in removed.json() and "claim_signer_address" not in api.get(
        "/projects/config").json()  # fmt: skip


def test_the_key_reaches_no_log_and_is_encrypted_at_rest(tmp_path):
    secrets_key = Fernet.generate_key().decode()
    log_path = tmp_path / "stderr.log"
    env = {"REWARDS_LOG_LEVEL": "debug", "REWARDS_LOG_FORMAT": "json", "REWARDS_SECRETS_KEY": secrets_key}
    server = Server(tmp_path / "data", env=env)
    command = [sys.executable, "-m", "rewards", "serve", "--port", str(server.port), "--data-dir", str(server.data_dir)]
    with log_path.open("wb") as log:
        server.process = subprocess.Popen(command, env=server.env, stderr=log)
    try:
        wait_healthy(server.url, [server.process])
        admin = Admin(server)
        project = admin.project()
        with Api(server, admin.key(project, "service_role"), project) as client:
            config = {**TOKEN_CONFIG, **SIGNING}
            assert client.put("/projects/config", json=config).status_code == 200
            assert client.put("/projects/config", json={**config, "tiers": 3}).status_code == 400
            assert (
                client.put("/projects/config", json={**config, "claim_signer_key": SIGNER_KEY[:-2]}).status_code == 400
            )
            assert client.post("/claim-checks/claim", json=user(TRADER)).json() == []
            assert close(client, ["cc_nope"]).status_code == 404
    finally:
        stop_processes([server.process])
    assert SIGNER_KEY[2:] not in log_path.read_text().lower() and secrets_key not in log_path.read_text()
    stored = b"".join(path.read_bytes() for path in (tmp_path / "data").glob("state.sqlite3*"))
    assert SIGNER_KEY[2:].encode() not in stored.lower() and b"fernet:" in stored  # encrypted at rest
    with sqlite3.connect(tmp_path / "data" / "state.sqlite3") as db:
        ((sealed,),) = db.execute("SELECT sealed_key FROM claim_signers").fetchall()
    assert Fernet(secrets_key.encode()).decrypt(sealed.removeprefix("fernet:").encode()).hex() == SIGNER_KEY[2:]
