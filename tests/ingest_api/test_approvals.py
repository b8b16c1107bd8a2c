"""API.md §9 on both shapes: Pending Approval mode. Payouts the configuration's `approval` holds wait in no total;
GET /payouts/pending-approval lists them; approve pays them (caps, budgets and claim checks alike), reject refuses
them (`rejected_by_operator`), each exactly once (two operators at once: one 200, one 409), all of a request or none."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import evm
from tests.support.harness import Admin, Api, eventually
from tests.web.test_auth import error_of

EVM = "evm_address"
ALICE, BOB = evm(1), evm(2)
TIERS = [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0", "r3": "0", "r4": "0"}}]
CONFIG = {
    "default_tier": "base",
    "tiers": TIERS,
    "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"},
                     "end_user_reward": {"fixed": "10"}}],
    "approval": {"currencies": ["point"], "above": "5"},
}  # fmt: skip


def typed(user: str) -> dict:
    return {"user_identifier": user, "user_identifier_type": EVM}


def buy(api: Api, dedup_id: str) -> None:
    purchase = {"name": "purchase", **typed(BOB), "dedup_id": dedup_id, "args": {"value": {"amount": "30"}}}
    assert api.post("/events/batch", json={"events": [purchase]}).status_code == 200
    api.wait_processed(dedup_id)


def points(api: Api, user: str) -> str:
    return api.get(f"/payouts/totals/{user}", params={"identifier_type": EVM}).json()["total_points"]


def held(api: Api) -> list[tuple[str, str, str]]:
    answer = api.get("/payouts/pending-approval", params={"page_size": 100})
    assert answer.status_code == 200, answer.text
    return [(row["id"], row["amount"], row["user_identifier"]) for row in answer.json()["results"]]


@pytest.fixture(scope="module")
def world(server):
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    code = api.post("/referral_codes", json={**typed(ALICE), "quantity": 1}).json()[0]["code"]
    assert api.patch(f"/referral_codes/{code}/use", json=typed(BOB)).status_code == 200
    api.close()
    return server, admin, project


@pytest.fixture
def api(world):
    server, admin, project = world
    api = Api(server, admin.key(project, "service_role"), project)
    yield api
    api.close()


def test_a_held_payout_waits_in_no_total_and_two_operators_approve_it_once(world, api: Api):
    buy(api, "a-1")
    assert eventually(lambda: _held_one(api)) == [("conversion:a-1:0", "10", BOB)]
    assert points(api, BOB) == "0" and points(api, ALICE) == "3"  # 10 held; the commission of 3 is not above 5
    server, admin, project = world
    operators = [Api(server, admin.key(project, "service_role"), project) for _ in range(2)]
    body = {"payout_ids": ["conversion:a-1:0"], "reason": "checked"}
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda op: op.post("/payouts/pending-approval/approve", json=body), operators))
    for operator in operators:
        operator.close()
    assert sorted(a.status_code for a in answers) == [200, 409]
    assert next(a for a in answers if a.status_code == 200).json() == {"approved": 1}
    assert error_of(next(a for a in answers if a.status_code == 409), 409) == (
        "payout conversion:a-1:0 is not pending approval")  # fmt: skip
    eventually(lambda: _points_are(api, BOB, "10"))
    assert held(api) == []


def test_a_rejected_payout_is_refused_and_a_request_applies_all_or_nothing(api: Api):
    buy(api, "r-1")
    eventually(lambda: _held_one(api))
    unknown = api.post("/payouts/pending-approval/reject", json={"payout_ids": ["conversion:r-1:0", "nope"]})
    assert error_of(unknown, 409) == "payout nope is not pending approval"
    assert held(api) == [("conversion:r-1:0", "10", BOB)]  # nothing of it applied
    assert api.post("/payouts/pending-approval/reject", json={"payout_ids": ["conversion:r-1:0"]}).json() == {
        "rejected": 1}  # fmt: skip
    again = api.post("/payouts/pending-approval/approve", json={"payout_ids": ["conversion:r-1:0"]})
    assert error_of(again, 409) == "payout conversion:r-1:0 is not pending approval"

    def refused() -> None:
        answer = api.get("/payouts/movements", params={"type": "point", **_who(BOB), "page_size": 100}).json()
        rows = [(r["total_amount"], r["payout_status"], r["payout_status_details"]) for r in answer["results"]
                if r["id"].startswith("conversion:r-1:0")]  # fmt: skip
        assert rows == [("10", "rejected", "rejected_by_operator")]

    eventually(refused)
    assert held(api) == [] and points(api, BOB) == "10"  # only a-1's


def test_an_approval_after_a_reversal_pays_what_is_left(api: Api):
    buy(api, "v-1")
    eventually(lambda: _held_one(api))
    half = {"dedup_id": "v-1", "reason": "refund", "fraction": "0.5"}
    assert api.post("/events/reversals", json={"reversals": [half]}).json() == {"reversed": 1}
    eventually(lambda: _status(api, "v-1", "partially_reversed"))
    assert points(api, ALICE) == "7.5"  # 3 of a-1, 3 of r-1, and v-1's 3 less half of it
    assert api.post("/payouts/pending-approval/approve", json={"payout_ids": ["conversion:v-1:0"]}).json() == {
        "approved": 1}  # fmt: skip
    eventually(lambda: _points_are(api, BOB, "15"))  # 10, then 10 less the half reversed
    more = api.post("/events/reversals", json={"reversals": [{"dedup_id": "v-1", "reason": "rest", "fraction": "0.5"}]})
    assert more.json() == {"reversed": 1}
    eventually(lambda: _status(api, "v-1", "reversed"))
    eventually(lambda: _points_are(api, BOB, "10"))  # all of v-1 back


def test_bad_requests_are_400(api: Api):
    for body in ({"payout_ids": []}, {"payout_ids": ["x"] * 101}, {"payout_ids": ["x"], "reason": "r" * 1001},
                 {"payout_ids": ["x"], "extra": 1}, {"payout_ids": [""]}):  # fmt: skip
        assert api.post("/payouts/pending-approval/approve", json=body).status_code == 400, body


def _who(user: str) -> dict:
    return {"user_identifier": user, "identifier_type": EVM}


def _held_one(api: Api) -> list:
    found = held(api)
    assert len(found) == 1
    return found


def _points_are(api: Api, user: str, expected: str) -> None:
    assert points(api, user) == expected


def _status(api: Api, dedup_id: str, expected: str) -> None:
    assert api.get("/events/status", params={"dedup_id": dedup_id}).json()["status"] == expected
