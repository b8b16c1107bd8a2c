"""API.md §11's erasure on both shapes: a referred buyer and its affiliate erased, then no read of the project (totals,
leaderboards, the affiliate listing, referral status, claim checks, exports, dead letters) answers their identifiers,
their figures are found under their pseudonyms, and every total is what it was; another project's same user is left
as it was; a user erased after coming back has one pseudonym still; the 400s, 403 and 404."""

import csv
import io
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import event, evm
from tests.support.harness import Admin, Api, eventually
from tests.web.test_auth import error_of

EVM = "evm_address"
BUYER, AFFILIATE, OTHER = evm(71), evm(72), evm(73)
PSEUDONYM = re.compile(r"erased:[0-9a-f]{32}")
CONFIG = {
    "default_tier": "base",
    "tiers": [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0", "r3": "0", "r4": "0"}}],
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "end_user_reward": {"fixed": "10"}}
    ],
}


def typed(identifier: str) -> dict:
    return {"user_identifier": identifier, "user_identifier_type": EVM}


def purchase(dedup_id: str, user: str, value: str = "100") -> dict:
    return {**event(dedup_id, user), "args": {"value": {"amount": value, "currency": {"name": "USD"}}}}


def points(api: Api, user: str) -> str:
    return api.get(f"/payouts/totals/{user}", params={"identifier_type": EVM}).json()["total_points"]


def erase(api: Api, user: str) -> str:
    answer = api.post("/users/erasures", json=typed(user))
    assert answer.status_code == 202, answer.text
    return answer.json()["erasure_id"]


def wait_done(api: Api, erasure_id: str) -> None:
    def done() -> None:
        answer = api.get(f"/users/erasures/{erasure_id}")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"status": "done"}

    eventually(done, timeout_s=60)


def shop(server, admin: Admin) -> Api:
    """A project where AFFILIATE refers BUYER, who bought twice (10 + 10 points to BUYER, 10 + 10 to AFFILIATE)
    and OTHER once."""
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    assert api.post("/affiliates", json={**typed(AFFILIATE), "name": "Aff"}).status_code == 201
    code = api.post("/referral_codes", json={**typed(AFFILIATE), "quantity": 1}).json()[0]["code"]
    assert api.patch(f"/referral_codes/{code}/use", json=typed(BUYER)).status_code == 200
    events = [purchase("b1", BUYER), purchase("b2", BUYER), purchase("o1", OTHER)]
    assert api.post("/events/batch", json={"events": events}).status_code == 200

    def paid() -> None:
        assert (points(api, BUYER), points(api, AFFILIATE), points(api, OTHER)) == ("20", "20", "10")

    eventually(paid, timeout_s=30)
    return api


def everything(api: Api) -> str:
    """What the project's reads answer about its users, as one text."""
    reads = [
        api.get("/payouts/leaderboard/payouts"),
        api.get("/payouts/leaderboard/users"),
        api.get("/affiliates"),
        api.get("/exports/payouts", params={"format": "csv"}),
        api.get("/exports/conversions", params={"format": "ndjson"}),
        api.get("/dead-letters"),
        api.get("/claim-checks/rewards-payouts"),
    ]
    for answer in reads:
        assert answer.status_code == 200, answer.text
    return "\n".join(answer.text for answer in reads)


@pytest.fixture(scope="module")
def erased(server):
    """Two projects with the same users; BUYER and AFFILIATE erased from the first."""
    admin = Admin(server)
    first, second = shop(server, admin), shop(server, admin)
    summary = first.get("/payouts/summary", params={"currency": "point"}).json()
    before = {"summary": summary, "other": points(first, OTHER)}
    for erasure_id in [erase(first, BUYER), erase(first, AFFILIATE)]:
        wait_done(first, erasure_id)
    yield first, second, before
    first.close()
    second.close()


def test_no_read_answers_an_erased_identifier(erased):
    first, _, _ = erased
    text = everything(first).lower()
    assert BUYER not in text and AFFILIATE not in text
    assert OTHER in text  # the reads do name users: the erased ones are gone, not every one
    assert PSEUDONYM.search(text)


def test_totals_are_unchanged_and_the_figures_move_to_the_pseudonyms(erased):
    first, _, before = erased
    assert first.get("/payouts/summary", params={"currency": "point"}).json() == before["summary"]
    assert points(first, OTHER) == before["other"]
    assert points(first, BUYER) == points(first, AFFILIATE) == "0"
    rows = list(csv.DictReader(io.StringIO(first.get("/exports/payouts", params={"format": "csv"}).text)))
    by_user: dict[str, int] = {}
    for row in rows:
        by_user[row["user_identifier"]] = by_user.get(row["user_identifier"], 0) + int(row["amount"])
    pseudonyms = sorted(user for user in by_user if PSEUDONYM.fullmatch(user))
    assert len(pseudonyms) == 2 and sorted(by_user[p] for p in pseudonyms) == [20, 20]
    listing = first.get("/affiliates").json()
    assert [PSEUDONYM.fullmatch(a["user_identifier"]) is not None for a in listing["results"]] == [True]


def test_the_referral_is_gone_from_the_user_and_kept_between_the_pseudonyms(erased):
    first, _, _ = erased
    status = first.get("/referral_codes/status", params=typed(BUYER)).json()
    assert status == {"referred": False}
    listing = first.get("/affiliates").json()["results"]
    assert listing[0]["referred_users"] == 1


def test_another_project_keeps_its_own_same_users(erased):
    _, second, _ = erased
    assert (points(second, BUYER), points(second, AFFILIATE)) == ("20", "20")
    text = everything(second).lower()
    assert BUYER in text and not PSEUDONYM.search(text)


def test_a_user_back_after_erasure_is_new_and_erased_again_to_the_same_pseudonym(erased):
    first, _, _ = erased
    payouts = first.get("/exports/payouts", params={"format": "csv"}).text
    assert first.post("/events/batch", json={"events": [purchase("b3", BUYER)]}).status_code == 200

    def paid_again() -> None:
        assert points(first, BUYER) == "10"

    eventually(paid_again, timeout_s=30)
    wait_done(first, erase(first, BUYER))
    after = first.get("/exports/payouts", params={"format": "csv"}).text
    assert BUYER not in after.lower()
    before_ids, after_ids = set(PSEUDONYM.findall(payouts)), set(PSEUDONYM.findall(after))
    assert after_ids == before_ids  # the buyer's new payout went to the pseudonym it had


def test_bad_requests_and_unknown_erasures(erased, server):
    first, _, _ = erased
    assert "user_identifier" in str(error_of(first.post("/users/erasures", json={"user_identifier_type": EVM}), 400))
    bad = first.post("/users/erasures", json={"user_identifier": "nope", "user_identifier_type": EVM})
    assert "evm_address" in str(error_of(bad, 400))
    assert error_of(first.post("/users/erasures", json={**typed(BUYER), "extra": 1}), 400)
    assert error_of(first.post("/users/erasures", content=b"[1", headers={"Content-Type": "application/json"}), 400)
    assert error_of(first.get("/users/erasures/er_unknown"), 404)
    assert error_of(first.get("/users/erasures/" + "x" * 100), 404)
    admin = Admin(server)
    standard = Api(server, admin.key(first.project_id, "SendTrackingEvent"), first.project_id)
    assert error_of(standard.post("/users/erasures", json=typed(BUYER)), 403)
    other = shop(server, admin)
    erasure_id = erase(first, OTHER)
    assert error_of(other.get(f"/users/erasures/{erasure_id}"), 404)  # another project's erasure is not found
    wait_done(first, erasure_id)
    standard.close()
    other.close()


def test_every_figure_stays_exact_while_events_flow_through_a_round(server):
    """Batches of other users written while a round copies and swaps the tables (the writers held meanwhile): none
    is lost or counted twice, in the raw rows (the export) nor in the aggregates the views fed (the summary)."""
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    assert api.post("/events/batch", json={"events": [purchase("mine", BUYER)]}).status_code == 200
    eventually(lambda: _equal(points(api, BUYER), "10"), timeout_s=30)
    senders = [Api(server, admin.key(project, "service_role"), project) for _ in range(3)]  # 10 batches a minute each
    erased = threading.Event()

    def flow() -> int:
        """Batches of 25 other users' purchases, one every 0.1 s, from before the request until after the round (or
        as many as the keys may send in a minute)."""
        batches = 0
        while (batches < 2 or not erased.is_set()) and batches < 3 * 9:  # the keys' limits: 10 batches a minute each
            events = [
                purchase(f"flow-{batches}-{i}", "0x" + format(1000 + batches * 25 + i, "040x")) for i in range(25)
            ]
            answer = senders[batches % 3].post("/events/batch", json={"events": events})
            assert answer.status_code == 200, answer.text
            batches += 1
            time.sleep(0.1)
        return batches

    with ThreadPoolExecutor(1) as pool:
        flowing = pool.submit(flow)
        erasure_id = erase(api, BUYER)
        wait_done(api, erasure_id)
        erased.set()
        batches = flowing.result(timeout=120)
    expected = str(10 * (1 + 25 * batches))

    def settled() -> None:
        assert api.get("/payouts/summary", params={"currency": "point"}).json() == {"total_payouts": expected}
        rows = list(csv.DictReader(io.StringIO(api.get("/exports/payouts", params={"format": "csv"}).text)))
        assert sum(int(row["amount"]) for row in rows) == int(expected) and len(rows) == 1 + 25 * batches
        assert BUYER not in {row["user_identifier"] for row in rows}

    eventually(settled, timeout_s=60)
    for each in (*senders, api):
        each.close()


def _equal(found: str, expected: str) -> None:
    assert found == expected
