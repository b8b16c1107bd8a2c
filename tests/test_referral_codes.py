"""API.md §2: referral codes and the referral graph."""

import asyncio
import re

import httpx

from tests.conftest import evm
from tests.harness import url_for
from tests.test_auth import error_of

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
