"""API.md §9 on both shapes: GET /claimable-rewards without a key: a user's closed, unexpired claim checks summed per
currency over every project that allows it, `project_id` narrowing it, limited per client address."""

import itertools
import secrets

import httpx
import pytest

from tests.conftest import event
from tests.support.harness import Admin, Api, eventually, url_for
from tests.web.test_auth import error_of

EVM = "evm_address"
# Users of their own: the read sums every project's checks, and other modules' projects on the same servers pay
# the shared test users.
BOB, CAROL = "0x" + secrets.token_hex(20), "0x" + secrets.token_hex(20)
USDC = {"address": "0xA0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "chain_id": 1, "name": "USDC", "decimals": 6}
DAI = {"address": "0x6B175474E89094C44Da98b954EedeAC495271d0F", "chain_id": 1, "name": "DAI", "decimals": 18}
TIERS = [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0", "r2": "0", "r3": "0", "r4": "0"}}]


def config(**extra) -> dict:
    swaps = [
        {"event_name": "swap", "base": {"fixed": "2"}, "currency": USDC, "end_user_reward": {"rate": "1"}},
        {"event_name": "trade", "base": {"fixed": "1"}, "currency": DAI, "end_user_reward": {"rate": "1"}},
    ]
    return {"default_tier": "base", "tiers": TIERS, "conversions": swaps, **extra}  # fmt: skip


def project_with_checks(server, admin: Admin, closed: list[str], left_open: list[str], **extra) -> str:
    """A project whose Bob has a closed check per event name of `closed`, and an open one per `left_open`."""
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=config(**extra)).status_code == 200
    names = closed + left_open
    events = [event(f"{project}-{n}", BOB, name) for n, name in enumerate(names)]
    assert api.post("/events/batch", json={"events": events}).status_code == 200
    api.wait_processed(*(e["dedup_id"] for e in events))

    def checks() -> list[dict]:
        rows = api.get("/claim-checks/rewards-payouts", params={"user_identifier": BOB, "user_identifier_type": EVM,
                                                                 "page_size": 100}).json()["results"]  # fmt: skip
        assert len(rows) == len(names)
        return rows

    rows = eventually(checks)
    to_close = []
    for name in closed:
        currency = (USDC if name == "swap" else DAI)["name"]
        to_close.append(next(r["id"] for r in rows if r["currency_name"] == currency and r["id"] not in to_close))
    closing = api.post("/claim-checks/close", json={"user_identifier": BOB, "user_identifier_type": EVM,
                                                    "claim_check_ids": to_close})  # fmt: skip
    assert closing.status_code == 200, closing.text
    api.close()
    return project


@pytest.fixture(scope="module")
def projects(server):
    admin = Admin(server)
    shown = project_with_checks(server, admin, ["swap", "trade"], ["swap"])
    also = project_with_checks(server, admin, ["swap"], [])
    hidden = project_with_checks(server, admin, ["swap"], [], public_claimable_rewards=False)
    return server, shown, also, hidden


_clients = itertools.count(1)


def fresh() -> str:
    """A client address of its own (a documentation address): polls never meet the per-address limit."""
    return f"2001:db8::{next(_clients):x}"


def public(server, client: str, **params) -> httpx.Response:
    """The read as `client` makes it (through a trusted proxy: the limit is per client address, and every other
    test's calls come from this machine's own)."""
    headers = {"X-Forwarded-For": client}
    return httpx.get(url_for(server, "GET", "/api/v1/claimable-rewards"), params=params, headers=headers)


def test_the_users_closed_checks_summed_over_the_projects_that_allow_it(projects):
    server, _, also, hidden = projects
    bob = {"user_identifier": BOB, "user_identifier_type": EVM}

    def summed() -> list:
        answer = public(server, fresh(), **bob)
        assert answer.status_code == 200, answer.text
        assert answer.json() == [
            {
                "currency_name": "DAI",
                "currency_address": DAI["address"].lower(),
                "currency_chain_id": 1,
                "currency_decimals": 18,
                "amount": "1000000000000000000",
            },
            {
                "currency_name": "USDC",
                "currency_address": USDC["address"].lower(),
                "currency_chain_id": 1,
                "currency_decimals": 6,
                "amount": "4000000",
            },
        ]  # fmt: skip (the closed USDC checks of the two projects that allow it; not the open one, not the hidden's)
        return answer

    answer = eventually(summed)
    assert answer.headers["X-RateLimit-Limit"] == "60"
    narrowed = public(server, "198.51.100.1", **bob, project_id=also).json()
    assert [(r["currency_name"], r["amount"]) for r in narrowed] == [("USDC", "2000000")]
    assert public(server, "198.51.100.1", **bob, project_id=hidden).json() == []  # its configuration does not allow it
    assert public(server, "198.51.100.1", **bob, project_id="no-such-project").json() == []
    assert public(server, "198.51.100.1", user_identifier=CAROL, user_identifier_type=EVM).json() == []


def test_bad_users_are_400_and_the_limit_is_per_client_address(projects):
    server, *_ = projects
    assert error_of(public(server, "198.51.100.2", user_identifier="not-an-address", user_identifier_type=EVM), 400)
    assert error_of(public(server, "198.51.100.2", user_identifier=BOB), 400)
    answers = [public(server, "198.51.100.3", user_identifier=CAROL, user_identifier_type=EVM) for _ in range(61)]
    assert [a.status_code for a in answers] == [200] * 60 + [429]
    assert int(answers[-1].headers["Retry-After"]) >= 1 and error_of(answers[-1], 429)
    assert public(server, "198.51.100.4", user_identifier=CAROL, user_identifier_type=EVM).status_code == 200
