"""API.md §2: referral codes and the referral graph."""

import asyncio
import re

import httpx

from tests.conftest import evm
from tests.support.harness import eventually, url_for
from tests.web.test_auth import error_of

ALICE = {"user_identifier": evm(1), "user_identifier_type": "evm_address"}


def user(n: int) -> dict:
    return {"user_identifier": evm(n), "user_identifier_type": "evm_address"}


def create(api, owner=ALICE, **fields) -> list[dict]:
    response = api.post("/referral_codes", json={**owner, **fields})
    assert response.status_code == 201, response.text
    return response.json()


def test_create_codes_from_body_or_query_string(api):
    records = create(api)
    assert len(records) == 5
    for record in records:
        assert re.fullmatch(r"[A-Z0-9]{7}", record["code"])
        assert record["used_by"] == [] and record["current_uses"] == record["uses"] == 0
        assert record["max_uses"] is None and record["remaining_uses"] is None and record["available"] is True
        assert record["created_at"].endswith("Z")
    response = api.post("/referral_codes", params={**user(2), "quantity": 2, "max_uses": 3})
    assert response.status_code == 201
    assert [(r["max_uses"], r["remaining_uses"]) for r in response.json()] == [(3, 3), (3, 3)]
    assert response.headers["X-RateLimit-Limit"] == "60"


def test_create_codes_validation(api):
    assert error_of(api.post("/referral_codes", json={**ALICE, "quantity": 51}), 400) == (
        "quantity must be between 1 and 50"
    )
    for bad in (0, -1, 1.5, "x"):
        error_of(api.post("/referral_codes", json={**ALICE, "max_uses": bad}), 400)
    error_of(api.post("/referral_codes", json={**ALICE, "quantity": 0}), 400)
    error_of(api.post("/referral_codes", json={"user_identifier": "nope", "user_identifier_type": "evm_address"}), 400)
    error_of(api.post("/referral_codes", json={"user_identifier": evm(1), "user_identifier_type": "fax"}), 400)


def test_list_codes_newest_first_paginated_and_404_without_codes(make_api, api):
    reader = make_api("referral_codes:read")
    first = create(api, quantity=2)
    second = create(api, quantity=1)
    page1 = reader.get("/referral_codes", params={**ALICE, "page_size": 2}).json()
    assert page1["count"] == 3 and page1["next_page"] == 2
    assert page1["results"][0]["code"] == second[0]["code"]
    page2 = reader.get("/referral_codes", params={**ALICE, "page_size": 2, "page": 2}).json()
    assert [r["code"] for r in page2["results"]] == [first[0]["code"]] and page2["next_page"] is None
    error_of(reader.get("/referral_codes", params=user(9)), 404)
    error_of(reader.get("/referral_codes", params={**ALICE, "page_size": 101}), 400)
    error_of(reader.get("/referral_codes", params={**ALICE, "page": 0}), 400)


def test_get_code_case_insensitive_and_404(make_api, api):
    code = create(api, quantity=1)[0]["code"]
    standard = make_api()
    assert standard.get(f"/referral_codes/{code.lower()}").json()["code"] == code
    error_of(standard.get("/referral_codes/ZZZZZZZ"), 404)


def test_patch_max_uses(api):
    code = create(api, quantity=1)[0]["code"]
    api.patch(f"/referral_codes/{code}/use", json=user(2))
    api.patch(f"/referral_codes/{code}/use", json=user(3))
    assert error_of(api.patch(f"/referral_codes/{code}", json={"max_uses": 1}), 400)
    record = api.patch(f"/referral_codes/{code}", json={"max_uses": 2}).json()
    assert (record["max_uses"], record["remaining_uses"], record["available"]) == (2, 0, False)
    assert api.patch(f"/referral_codes/{code}", json={"max_uses": None}).json()["available"] is True
    error_of(api.patch("/referral_codes/ZZZZZZZ", json={"max_uses": 3}), 404)


def test_use_code_and_every_error(make_api, api):
    standard = make_api()
    code = create(api, quantity=1, max_uses=2)[0]["code"]
    record = standard.patch(f"/referral_codes/{code}/use", params=user(2)).json()
    assert record["current_uses"] == 1 and record["used_by"][0]["identifier"] == evm(2)
    status = standard.get("/referral_codes/status", params=user(2)).json()
    assert status["referred"] is True and status["code"] == code and status["referrer_identifier"] == evm(1)
    assert standard.get("/referral_codes/status", params=user(50)).json() == {"referred": False}

    error_of(standard.patch("/referral_codes/ZZZZZZZ/use", json=user(3)), 404)
    error_of(standard.patch(f"/referral_codes/{code}/use", json=ALICE), 400)  # own code
    error_of(standard.patch(f"/referral_codes/{code}/use", json=user(2)), 409)  # already referred
    body = {**user(3), "signature": "0xsig", "signature_message": "hello", "chain_id": 1}
    assert standard.patch(f"/referral_codes/{code}/use", json=body).json()["available"] is False
    error_of(standard.patch(f"/referral_codes/{code}/use", json=user(4)), 422)  # limit reached

    # alice referred user 2; user 2's code used by alice would make a cycle
    bobs = create(api, owner=user(2), quantity=1)[0]["code"]
    error_of(standard.patch(f"/referral_codes/{bobs}/use", json=ALICE), 400)


async def test_max_uses_n_used_concurrently_by_3n_users_succeeds_exactly_n_times(server, api):
    n = 5
    code = create(api, quantity=1, max_uses=n)[0]["code"]
    headers = {"Authorization": f"Bearer {api.api_key}"}
    url = url_for(server, "PATCH", f"/api/v1/referral_codes/{code}/use")
    async with httpx.AsyncClient(headers=headers, timeout=30) as client:
        responses = await asyncio.gather(*(client.patch(url, json=user(10 + i)) for i in range(3 * n)))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * n + [422] * (2 * n)
    record = api.get(f"/referral_codes/{code}").json()
    assert record["current_uses"] == n and len(record["used_by"]) == n and record["available"] is False


# -- API.md §7: the published client's referral reads and writes ------------------------------------------------


def referrer(api, n: int) -> dict:
    response = api.get("/user/referrer", params=user(n))
    assert response.status_code == 200, response.text
    return response.json()


NO_REFERRER = {
    "referrer_identifier": None, "referrer_identifier_type": None, "referrer_name": None, "referrer_code": None,
    "referrer_codes": [], "referrer_user_rebate_rate": None,
}  # fmt: skip


def test_max_uses_0_disables_a_code_used_or_not(api):
    code = create(api, quantity=1)[0]["code"]
    api.patch(f"/referral_codes/{code}/use", json=user(2))
    record = api.patch(f"/referral_codes/{code}", json={"max_uses": 0}).json()
    assert (record["max_uses"], record["current_uses"], record["remaining_uses"], record["available"]) == (
        0,
        1,
        0,
        False,
    )
    error_of(api.patch(f"/referral_codes/{code}/use", json=user(3)), 422)
    assert api.patch(f"/referral_codes/{code}", json={"max_uses": None}).json()["available"] is True
    error_of(api.patch(f"/referral_codes/{code}", json={"max_uses": -1}), 400)
    error_of(api.post("/referral_codes", json={**ALICE, "max_uses": 0}), 400)  # a new code's limit stays positive


def test_user_referrer(make_api, api):
    standard = make_api()  # any key of the project
    assert referrer(standard, 2) == {"user_identifier": evm(2), "user_identifier_type": "evm_address", **NO_REFERRER}
    first, second = (r["code"] for r in create(api, quantity=2))  # in one call: oldest first is creation order
    third = create(api, quantity=1)[0]["code"]
    assert api.patch(f"/referral_codes/{third}/use", json=user(2)).status_code == 200
    found = referrer(standard, 2)
    assert (found["referrer_identifier"], found["referrer_identifier_type"], found["referrer_name"]) == (
        evm(1), "evm_address", None)  # fmt: skip
    assert found["referrer_codes"][-1] == third and set(found["referrer_codes"][:2]) == {first, second}
    assert found["referrer_code"] == found["referrer_codes"][0] and found["referrer_user_rebate_rate"] is None
    # an affiliate's name, and the rebate rate of the code that referred the user
    chosen = {"address": evm(5), "identifier_type": "evm_address", "name": "Eve", "code": "eve_code",
              "user_rebate_rate": "0.05"}  # fmt: skip
    assert api.post("/affiliates", json=chosen).status_code == 201
    assert api.patch("/referral_codes/eve_code/use", json=user(6)).status_code == 200
    found = referrer(standard, 6)
    assert (found["referrer_name"], found["referrer_code"], found["referrer_codes"]) == (
        "Eve",
        "EVE_CODE",
        ["EVE_CODE"],
    )
    assert found["referrer_user_rebate_rate"] == 0.05
    error_of(
        standard.get("/user/referrer", params={"user_identifier": "nope", "user_identifier_type": "evm_address"}), 400
    )
    error_of(standard.get("/user/referrer", params={"user_identifier": evm(2)}), 400)


def test_delete_referral(make_api, api):
    config = {"default_tier": None, "tiers": [], "referral_reward": {"referrer": "50", "referred": "10"}}
    assert api.put("/projects/config", json=config).status_code == 200
    code = create(api, quantity=1, max_uses=1)[0]["code"]
    assert api.post("/affiliates", json=ALICE).status_code == 201
    assert api.patch(f"/referral_codes/{code}/use", json=user(2)).status_code == 200
    query = {**user(2), "referrer_identifier": evm(1), "referrer_identifier_type": "evm_address"}
    url = f"/referral_codes/{code}/referrals"
    error_of(make_api().request("DELETE", url, params=query, json={}), 403)  # a write: service_role
    error_of(api.request("DELETE", url, params={**query, "referrer_identifier": evm(3)}, json={}), 404)
    other = create(api, owner=user(3), quantity=1)[0]["code"]
    error_of(api.request("DELETE", f"/referral_codes/{other}/referrals", params=query, json={}), 404)
    error_of(api.request("DELETE", url, params={**query, **user(4)}, json={}), 404)  # not referred
    assert isinstance(error_of(api.request("DELETE", url, params={**user(2)}, json={}), 400), list)

    proof = {"signature": "0x" + "5" * 130, "signature_message": "remove", "chain_id": 8453}
    removed = api.request("DELETE", url.lower(), params=query, json=proof)
    assert removed.status_code == 200, removed.text
    assert removed.json()["code"] == code and removed.json()["removed"] is True
    assert referrer(api, 2) == {"user_identifier": evm(2), "user_identifier_type": "evm_address", **NO_REFERRER}
    assert api.get("/referral_codes/status", params=user(2)).json() == {"referred": False}
    kept = api.get(f"/referral_codes/{code}").json()  # the use stays counted: max_uses caps uses
    assert (kept["current_uses"], kept["available"], [u["identifier"] for u in kept["used_by"]]) == (1, False, [evm(2)])
    error_of(api.request("DELETE", url, params=query, json={}), 404)  # removed already

    # referred again (the workers pay the new use: the warehouse no longer counts the removed referral)
    assert api.patch(f"/referral_codes/{other}/use", json=user(2)).status_code == 200
    assert referrer(api, 2)["referrer_identifier"] == evm(3)

    def settled() -> None:
        rewards = {n: api.get(f"/payouts/totals/{evm(n)}", params={"identifier_type": "evm_address"}).json()
                   for n in (1, 2, 3)}  # fmt: skip
        # payouts made stay: 1 keeps its 50; 2 got 10 twice; 3 its 50
        assert [rewards[n]["by_kind"]["referral_reward"] for n in (1, 2, 3)] == ["50", "20", "50"]
        [listed] = api.get("/referral_codes", params=ALICE).json()["results"]
        assert (listed["total_users"], listed["total_earnings"], listed["uses"]) == (0, 50, 1)  # 2 counted out
        [affiliate] = api.get("/affiliates", params={"query": evm(1)}).json()["results"]
        assert affiliate["referred_users"] == 0 and affiliate["total_earnings"] == "50"

    eventually(settled)


def test_list_codes_answers_the_clients_figures(make_api, api):
    rates = {"r1": "0.1", "r2": "0", "r3": "0", "r4": "0"}
    assert api.put("/projects/config", json={
        "default_tier": "base", "tiers": [{"id": "base", "name": "Base", "rank": 1, "rates": rates}],
        "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point"}],
        "referral_reward": {"referrer": "5", "referred": "1"},
    }).status_code == 200  # fmt: skip
    reader = make_api("referral_codes:read")
    code = create(api, quantity=1)[0]["code"]
    [fresh] = reader.get("/referral_codes", params=ALICE).json()["results"]
    assert (fresh["rebate_rate"], fresh["clicks"], fresh["total_users"], fresh["total_earnings"]) == (None, 0, 0, 0)
    api.patch(f"/referral_codes/{code}/use", json=user(2))
    value = {"amount": "12.5", "currency": {"name": "USD"}}
    events = [{**user(2), "name": "purchase", "dedup_id": "p", "args": {"value": value}}]
    assert api.post("/events/batch", json={"events": events}).json() == {"ingested_events": 1}
    api.wait_processed("p")

    def figured() -> None:
        [listed] = reader.get("/referral_codes", params=ALICE).json()["results"]
        assert (listed["uses"], listed["total_users"], listed["total_earnings"]) == (1, 1, 6.25)  # 5 + 0.1 × 12.5
        assert api.get(f"/referral_codes/{code}").json()["total_earnings"] == 6.25

    eventually(figured)


class _WarehouseDown:
    """A figures port whose warehouse does not answer (as the ClickHouse adapter raises then)."""

    async def of_codes(self, project_id, codes):
        raise ConnectionError("ClickHouse did not answer")


async def test_a_warehouse_that_does_not_answer_leaves_the_figures_at_zero_never_fails_the_answer():
    from ingest_api.referral_codes.service import FIGURES_MISSING, figures_of
    from rewards.domain.payouts import User
    from rewards.domain.referrals import CodeRecord

    record = CodeRecord("ABC1234", User(evm(1), "evm_address"), 0, None, 1)
    before = FIGURES_MISSING._value.get()
    figures = await figures_of(_WarehouseDown(), _WarehouseDown(), "p", [record])
    assert figures == {"ABC1234": {"rebate_rate": None, "clicks": 0, "total_users": 0, "total_earnings": 0}}
    assert FIGURES_MISSING._value.get() == before + 1
