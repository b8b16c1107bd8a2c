"""Every operation's answer, with figures in it, holds to the schema the OpenAPI document gives it, and names no field
the schema does not (the fuzz, tests/web/test_fuzz.py, sees mostly empty answers: its project has no data).

One project for the module, on the embedded server: a configuration paying points and a token (with a claim signer),
Alice an affiliate with a generated code and an affiliate code, Bob referred by Alice and Dave by Bob, conversions in
points and in the token, a pageview through Alice's code, claim checks closed and claimed. Each answer is checked
against its operation's documented schema with `additionalProperties: false` on every object that lists its
properties."""

import copy

import pytest
from jsonschema import Draft202012Validator

from rewards.domain.timestamps import now_ms
from rewards.settings import Settings
from runtime.serve import embedded_app
from tests.conftest import SERVICE, event
from tests.ingest_api.test_claim_checks import SIGNING, TOKEN_CONFIG, USDC
from tests.ingest_api.test_webhooks import PUBLIC, held, on_state
from tests.support.harness import Admin, Api, eventually, run_async

DOCUMENT = embedded_app(Settings()).openapi()
ALICE, BOB, CAROL, DAVE = (f"0x{n:040x}" for n in (0xA11CE, 0xB0B, 0xCA201, 0xDA4E))
EVM = "evm_address"


def typed(identifier: str) -> dict:
    return {"user_identifier": identifier, "user_identifier_type": EVM}


def _closed(schema: object) -> object:
    """The schema with no property but those it names, at every level."""
    if isinstance(schema, dict):
        closed = {key: _closed(value) for key, value in schema.items()}
        if "properties" in closed and "additionalProperties" not in closed:
            closed["additionalProperties"] = False
        return closed
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    return schema


COMPONENTS = _closed(copy.deepcopy(DOCUMENT["components"]))


def documented(method: str, path: str, response) -> object:
    """The answer, checked: a success, holding to its operation's documented (closed) schema."""
    assert response.status_code < 300, (method, path, response.status_code, response.text)
    operation = DOCUMENT["paths"]["/api/v1" + path][method]
    media = operation["responses"][str(response.status_code)]["content"]["application/json"]
    body = response.json()
    validator = Draft202012Validator({**_closed(copy.deepcopy(media["schema"])), "components": COMPONENTS})
    problems = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
    assert not problems, (method, path, problems, body)
    return body


@pytest.fixture(scope="module")
def api(embedded_server):
    admin = Admin(embedded_server)
    project_id = admin.project()
    with Api(embedded_server, admin.key(project_id, SERVICE), project_id) as api:
        yield api


@pytest.fixture(scope="module")
def scenario(api) -> dict:
    """Alice refers Bob (a generated code) and Carol (her affiliate code, with a rebate rate); Bob refers Dave. Bob and
    Dave buy and swap; Carol buys; the checks of Bob's swaps are closed, one of them claimed."""
    limits = {"budgets": [{"currency": USDC["address"], "amount": str(10**24)}],
              "caps": [{"applies_to": "wallet", "currency": "point", "amount": "100000", "window": "30d"}]}  # fmt: skip
    config = {**TOKEN_CONFIG, **SIGNING, **limits}
    documented("put", "/projects/config", api.put("/projects/config", json=config))
    documented("get", "/projects/config", api.get("/projects/config"))
    alice = {**typed(ALICE), "name": "Alice", "region": "EU", "audience": "traders", "tier": "gold"}
    documented("post", "/affiliates", api.post("/affiliates", json=alice))
    codes = documented("post", "/referral_codes", api.post("/referral_codes", json={**typed(ALICE), "quantity": 1}))
    code = codes[0]["code"]
    vanity = {"address": ALICE, "identifier_type": EVM, "code": "ALICE_1", "name": "ALICE_1", "user_rebate_rate": 0.1}
    documented("post", "/affiliates", api.post("/affiliates", json=vanity))
    documented("patch", "/referral_codes/{code}/use", api.patch(f"/referral_codes/{code}/use", json=typed(BOB)))
    api.patch("/referral_codes/ALICE_1/use", json=typed(CAROL)).raise_for_status()
    bobs = documented("post", "/referral_codes", api.post("/referral_codes", json={**typed(BOB), "quantity": 1}))
    api.patch(f"/referral_codes/{bobs[0]['code']}/use", json=typed(DAVE)).raise_for_status()
    value = {"value": {"amount": "200", "currency": {"name": "USD"}}, "revenue": {"amount": "12.5"}}
    revenue = {"revenue": {"amount": "100", "currency": {"name": "USD"}}}
    events = [
        event("p-bob", user=BOB, args=value),
        event("s-bob-1", user=BOB, name="swap", args=revenue),
        event("s-bob-2", user=BOB, name="swap", args=revenue),
        event("p-carol", user=CAROL, args=value),
        event("p-dave", user=DAVE, args=value),
        event("s-dave", user=DAVE, name="swap", args=revenue),
    ]
    documented("post", "/events/batch", api.post("/events/batch", json={"events": events}))
    documented("post", "/events", api.post("/events", json=event("p-bob-2", user=BOB, args=value)))
    pageview = {
        "name": "pageview",
        "args": {"page": "/"},
        "metadata": {"tracking_id": "t-1", "affiliate_id": "ALICE_1"},
    }
    documented("post", "/events", api.post("/events", json=pageview))
    api.wait_processed("p-bob", "s-bob-1", "s-bob-2", "p-carol", "p-dave", "s-dave", "p-bob-2")
    checks = eventually(lambda: _bobs_token_checks(api))
    documented(
        "post", "/claim-checks/close", api.post("/claim-checks/close", json={**typed(BOB), "claim_check_ids": checks})
    )
    claims = {"hash": "0x" + "1" * 64, "claimed_at": "2026-11-20T10:00:00Z", "claim_check_ids": checks[:1]}
    documented("post", "/claim-checks/claims", api.post("/claim-checks/claims", json=claims))
    eventually(lambda: _claimed(api))
    return {"code": code}


def _bobs_token_checks(api) -> list[str]:
    listed = api.get("/claim-checks/rewards-payouts", params={**typed(BOB), "currency_address": USDC["address"]}).json()
    assert len(listed["results"]) == 3  # his two swaps', and his commission on Dave's
    return [check["id"] for check in listed["results"]]


def _claimed(api) -> None:
    assert api.get("/claim-checks/claim-history", params=typed(BOB)).json()["total_count"] == 1


PORTAL = {"user_identifier": ALICE}
READS = [
    ("/payouts/summary", {"currency": "point"}),
    (f"/payouts/totals/{ALICE}", {"identifier_type": EVM}),
    ("/payouts/leaderboard/payouts", {"fields": "affiliate_code,tiers,referred_volume,referred_users"}),
    ("/payouts/leaderboard/users", {"fields": "affiliate_code,tiers,referred_volume,referred_users"}),
    ("/payouts/leaderboard/payouts", {"currency_address": USDC["address"]}),
    (
        "/payouts/leaderboard/points",
        {"fields": "affiliate_code,tiers,referred_volume,referred_users,enduser_volume,enduser_revenue"},
    ),
    ("/payouts/leaderboard/volume", {}),
    ("/payouts/leaderboard/volume", {"currency_address": "usd"}),
    ("/payouts/leaderboard/revenue", {"fields": "attributions,volume_usd,points"}),
    ("/leaderboard/referred", {}),
    ("/payouts/leaderboard/referred-volume", {"user_identifiers": f"{ALICE},{BOB}"}),
    ("/payouts", {"type": "point", **typed(ALICE)}),
    ("/payouts", {"type": "onchain-currency", **typed(BOB)}),
    ("/payouts/movements", {"type": "point", **typed(ALICE)}),
    ("/payouts/movements", {"type": "onchain-currency", **typed(BOB)}),
    ("/payouts/by-referrer", {**typed(ALICE), "referrer_scope": "all"}),
    ("/payouts/terms-by-tier", {}),
    ("/conversions", {}),
    ("/affiliates", {}),
    ("/affiliates/codes/ALICE_1/availability", {}),
    ("/affiliates/codes/NEW_ONE", {}),
    (f"/affiliates/{ALICE}", {"identifier_type": EVM}),
    ("/affiliate-portal/stats", PORTAL),
    ("/affiliate-portal/total-stats", {}),
    ("/affiliate-portal/referral-tree", PORTAL),
    ("/affiliate-portal/stats-breakdown", {**PORTAL, "group_by": "day"}),
    ("/affiliate-portal/new-traders", PORTAL),
    ("/affiliate-portal/paid-volumes-by-level", PORTAL),
    ("/claim-checks/claim-history", typed(BOB)),
    ("/claim-checks/totals", typed(BOB)),
    ("/claim-checks/rewards-payouts", {}),
    ("/claim-checks", typed(BOB)),
    ("/referral_codes", typed(ALICE)),
    ("/referral_codes/status", typed(BOB)),
    ("/referral_codes/status", typed(ALICE)),
    ("/referral_codes/ALICE_1", {}),
    ("/user/referrer", typed(CAROL)),
    ("/user/referrer", typed(ALICE)),
    ("/events/status", {"dedup_id": "p-bob"}),
    ("/events/status", {**typed(BOB), "event_name": "purchase"}),
    ("/console/health", {}),
    ("/console/points", {}),
    ("/console/claim-checks", {}),
    ("/console/integrity", {}),
    ("/projects/budgets", {}),
    ("/claimable-rewards", typed(BOB)),
    ("/payouts/pending-acceptance", typed(BOB)),
    ("/payouts/pending-approval", {}),
]
TEMPLATES = {
    f"/payouts/totals/{ALICE}": "/payouts/totals/{user_identifier}",
    f"/affiliates/{ALICE}": "/affiliates/{user_identifier}",
    "/affiliates/codes/ALICE_1/availability": "/affiliates/codes/{code}/availability",
    "/affiliates/codes/NEW_ONE": "/affiliates/codes/{code}",
    "/referral_codes/ALICE_1": "/referral_codes/{code}",
}


@pytest.mark.parametrize(("path", "params"), READS, ids=[f"{path} {sorted(params)}" for path, params in READS])
def test_each_read_answers_as_documented(api, scenario, path, params):
    documented("get", TEMPLATES.get(path, path), api.get(path, params=params))


def test_each_write_answers_as_documented(api, scenario):
    code = scenario["code"]
    forms = api.post("/claim-checks/claim", json=typed(BOB))
    assert documented("post", "/claim-checks/claim", forms)  # the closed check not claimed
    documented("patch", "/referral_codes/{code}", api.patch(f"/referral_codes/{code}", json={"max_uses": 5}))
    rate = {"identifier_type": EVM, "code": "ALICE_1", "rebate_rate": 0.2}
    documented(
        "post", "/affiliates/{user_identifier}/rebate-rate", api.post(f"/affiliates/{ALICE}/rebate-rate", json=rate)
    )
    renamed = {"identifier_type": EVM, "code": "ALICE_2"}
    documented("post", "/affiliates/{user_identifier}", api.post(f"/affiliates/{ALICE}", json=renamed))
    daves = api.get("/referral_codes/status", params=typed(DAVE)).json()["code"]
    removal = {**typed(DAVE), "referrer_identifier": BOB, "referrer_identifier_type": EVM}
    removed = api.delete(f"/referral_codes/{daves}/referrals", params=removal)
    documented("delete", "/referral_codes/{code}/referrals", removed)


def test_the_webhook_answers_are_as_documented(api, embedded_server):
    """API.md §10: an endpoint and its deliveries (enqueued as the dispatcher enqueues them), each answer closed."""
    made = documented("post", "/webhooks", api.post("/webhooks", json={"url": PUBLIC, "events": ["reward.earned"]}))
    path = f"/webhooks/{made['id']}"
    endpoints = documented("get", "/webhooks", api.get("/webhooks"))
    assert made["id"] in [e["id"] for e in endpoints["results"]]
    documented("get", "/webhooks/{endpoint_id}", api.get(path))
    deliveries = [held(api, made["id"], f"payout-{n}", now_ms() - n) for n in range(2)]
    assert run_async(on_state(embedded_server, lambda state: state.enqueue(deliveries))) == 2
    page = documented(
        "get", "/webhooks/{endpoint_id}/deliveries", api.get(f"{path}/deliveries", params={"page_size": 1})
    )
    assert (len(page["results"]), page["total_count"], page["next_page"]) == (1, 2, 2)
    redeliver = api.post(f"{path}/deliveries/{deliveries[0].id}/redeliver")
    documented("post", "/webhooks/{endpoint_id}/deliveries/{delivery_id}/redeliver", redeliver)
    documented("delete", "/webhooks/{endpoint_id}", api.delete(path))
