"""Dead letters listed and replayed on both shapes (GET /dead-letters, POST /dead-letters/replay, `rewards
dead-letters`): a purchase set aside under a configuration whose rate overflows the payout limit is listed with its
reason; once the configuration is mended, a replay pays it; a replay run again pays nothing more (the workers write a
replayed record once); the filters, the cursor and the keys hold."""

import json
import os
import subprocess
import sys

import pytest

from tests.query_api.test_payouts import purchase
from tests.support.harness import Admin, Api, eventually
from tests.web.test_auth import error_of

OVERFLOWING = "9" * 30  # within the limits; rate × amount is ~10^60, past the payout limit (10^48)


def config(rate: str) -> dict:
    rule = {"event_name": "purchase", "base": {"rate_of": "value", "rate": rate}, "end_user_reward": {"fixed": "1"}}
    return {"default_tier": None, "tiers": [], "conversions": [rule]}


def status_of(api: Api, dedup_id: str) -> str:
    return api.get("/events/status", params={"dedup_id": dedup_id}).json()["status"]


def paid(api: Api) -> str:
    return api.get("/payouts/summary", params={"currency": "point"}).json()["total_payouts"]


def send(api: Api, *events: dict) -> None:
    assert api.post("/events/batch", json={"events": list(events)}).status_code == 200
    api.wait_processed(events[-1]["dedup_id"], timeout_s=30)


@pytest.fixture(scope="module")
def world(server):
    """A project with one purchase set aside (`overflow`) and one paid (`after`, the same buyer's)."""
    admin = Admin(server)
    project = admin.project()
    with Api(server, admin.key(project, "service_role"), project) as api:
        assert api.put("/projects/config", json=config(OVERFLOWING)).status_code == 200
        send(api, purchase("overflow", 1, OVERFLOWING), purchase("after", 1, "0"))
        assert status_of(api, "overflow") == "failed" and paid(api) == "1"
        eventually(lambda: _listed(api))
    return server, admin, project


def _listed(api: Api) -> dict:
    answer = api.get("/dead-letters")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["total_count"] == 1, body
    return body["results"][0]


@pytest.fixture
def shop(world):
    """The project through a key of its own per test (replays are limited per key)."""
    server, admin, project = world
    with Api(server, admin.key(project, "service_role"), project) as api:
        yield api


def test_a_dead_letter_is_listed_with_why_and_what_it_was(shop: Api):
    dead = _listed(shop)
    assert (dead["record_type"], dead["source_id"], dead["replayable"]) == ("conversion", "overflow", True)
    assert "payout limit" in dead["reason"] and json.loads(dead["payload"])["dedup_id"] == "overflow"
    assert dead["id"].startswith("dl_") and dead["not_replayable_because"] is None
    assert shop.get("/dead-letters", params={"reason": "PAYOUT LIMIT"}).json()["total_count"] == 1  # any case
    assert shop.get("/dead-letters", params={"reason": "nothing like it"}).json()["total_count"] == 0
    assert shop.get("/dead-letters", params={"record_type": "code_use"}).json()["total_count"] == 0
    assert shop.get("/dead-letters", params={"to": dead["failed_at"]}).json()["total_count"] == 0  # exclusive
    assert shop.get("/dead-letters", params={"from": dead["failed_at"]}).json()["total_count"] == 1


def test_replayed_once_mended_it_is_paid_once_however_often_it_is_replayed(shop: Api):
    assert shop.put("/projects/config", json=config("1")).status_code == 200
    replayed = shop.post("/dead-letters/replay", json={"reason": "payout limit"})
    assert replayed.status_code == 200, replayed.text
    assert replayed.json() == {"replayed": 1, "not_replayable": {}, "next": None}
    eventually(lambda: _status_is(shop, "overflow", "processed"), timeout_s=30)
    assert paid(shop) == "2"  # after's 1, overflow's 1 at last
    again = shop.post("/dead-letters/replay", json={})
    assert again.json() == {"replayed": 1, "not_replayable": {}, "next": None}  # published again, written once:
    send(shop, purchase("later", 1, "0"))  # the buyer's next purchase, behind the replay on the buyer's partition
    assert paid(shop) == "3"
    assert shop.get("/dead-letters").json()["total_count"] == 1  # the dead letter stays, for the record


def _status_is(api: Api, dedup_id: str, expected: str) -> None:
    assert status_of(api, dedup_id) == expected


@pytest.mark.parametrize(
    ("body", "problem"),
    [({"after": "not-a-cursor"}, "after"), ({"from": "soon"}, "from"), ({"colour": "red"}, "colour"),
     ({"reason": ""}, "reason")],
)  # fmt: skip
def test_a_bad_replay_is_a_400(shop: Api, body: dict, problem: str):
    assert problem in str(error_of(shop.post("/dead-letters/replay", json=body), 400))


def test_only_a_service_role_key_of_the_project_sees_or_replays_them(world):
    server, admin, project = world
    with Api(server, admin.key(project), project) as standard:
        assert standard.get("/dead-letters").status_code == 403
        assert standard.post("/dead-letters/replay", json={}).status_code == 403
    other = admin.project()
    with Api(server, admin.key(other, "service_role"), other) as api:
        assert api.get("/dead-letters").json()["total_count"] == 0
        assert api.post("/dead-letters/replay", json={}).json() == {"replayed": 0, "not_replayable": {}, "next": None}


def test_rewards_dead_letters_lists_and_replays_through_the_api(shop: Api):
    url = shop.server.urls["ingest"]
    env = {**os.environ, "REWARDS_API_KEY": shop.api_key}

    def run(*args: str) -> dict:
        command = [sys.executable, "-m", "rewards", "dead-letters", *args, "--url", url]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    listed = run("list", "--reason", "payout limit")
    assert [(d["source_id"], d["record_type"]) for d in listed["results"]] == [("overflow", "conversion")]
    assert run("replay", "--type", "conversion") == {"replayed": 1, "not_replayable": {}}
