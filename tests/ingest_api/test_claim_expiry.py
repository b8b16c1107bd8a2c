"""API.md §8's claim check expiry on both shapes: a check closed under `claim_check_expiry` carries its expiry, its
signed form's deadline is that expiry, and once past it unclaimed the sweep makes it `expired`: not claimable, its
amount back in the budget. The test servers sweep every half second (tests.support.harness.FAST_SWEEPS)."""

import time
from datetime import datetime

import pytest

from tests.conftest import evm
from tests.ingest_api.test_claim_checks import SIGNING, TOKEN_CONFIG, USDC, claim, close, ids_of, swap
from tests.support.harness import Admin, Api, eventually
from tests.web.test_auth import error_of

TRADER = 2
EXPIRING = {**TOKEN_CONFIG, **SIGNING, "claim_check_expiry": "2s", "budgets": [{"currency": USDC["address"],
            "amount": "20000000"}]}  # fmt: skip


@pytest.fixture
def expiring(server):
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=EXPIRING).status_code == 200
    yield api
    api.close()


def budget(api: Api) -> dict:
    (found,) = api.get("/projects/budgets").json()
    return {key: found[key] for key in ("paid", "reserved", "remaining")}


def test_a_closed_check_expires_unclaimed_and_its_amount_returns_to_the_budget(expiring: Api):
    assert expiring.get("/projects/config").json()["claim_check_expiry"] == "2s"
    assert expiring.post("/events/batch", json={"events": [swap("swap-1", "20")]}).status_code == 200
    expiring.wait_processed("swap-1")  # revenue 20: base 6 USDC, the trader's half: 3 USDC
    check_id = eventually(lambda: _one(ids_of(expiring, TRADER)))
    eventually(lambda: _equal(budget(expiring), {"paid": "3000000", "reserved": "3000000", "remaining": "17000000"}))

    (form,) = close(expiring, [check_id]).json()
    assert form["signatures"] and form["deadline"] <= time.time() + 3  # signed, for its 2 s

    def expired() -> dict:
        (found,) = expiring.get("/claim-checks/rewards-payouts", params={"status": "expired"}).json()["results"]
        assert found["id"] == check_id and found["status"] == "expired"
        return found

    listed = eventually(expired, timeout_s=15)
    expires_at = datetime.fromisoformat(listed["expires_at"].replace("Z", "+00:00"))
    assert form["deadline"] == int(expires_at.timestamp())  # the signed form's deadline is the check's expiry
    eventually(lambda: _equal(budget(expiring), {"paid": "0", "reserved": "0", "remaining": "20000000"}))
    assert error_of(claim(expiring, [check_id]), 409)  # past its deadline: no contract paid it
    totals = expiring.get("/claim-checks/totals", params={"user_identifier": evm(TRADER),
                                                           "user_identifier_type": "evm_address"}).json()  # fmt: skip
    assert totals == {"claimed": [], "unclaimed": [], "debt": []}  # an expired check is neither
    mine = expiring.get("/claim-checks", params={"user_identifier": evm(TRADER), "user_identifier_type": "evm_address"})
    assert [(c["status"], c["deadline_seconds"]) for c in mine.json()["claim_checks"]] == [("expired", 0)]


def test_the_expiry_takes_the_durations_grammar(expiring: Api):
    for bad in ("0s", "90 d", "calendar_month", "3651d", 90):
        answer = expiring.put("/projects/config", json={**EXPIRING, "claim_check_expiry": bad})
        assert answer.status_code == 400 and "claim_check_expiry" in answer.text, (bad, answer.text)


def _one(ids: list[str]) -> str:
    assert len(ids) == 1, ids
    return ids[0]


def _equal(found, expected):
    assert found == expected, found
    return found
