"""A user's payouts (API.md §7; the published client's G6): GET /payouts (grouped by conversion), /payouts/movements
(one row per payout, newest first) and /payouts/by-referrer, on both shapes, checked against what the events paid.

One project per shape, set up once (module scope): Alice's affiliate code ALICE, with a rebate rate of 0.2, refers Bob
and Dan; Bob's generated code refers Carol. Bob and Carol buy, swap (USDC) and sign up on fixed days of January 2026.
"""

import json
import uuid
from dataclasses import dataclass
from decimal import Decimal

import pytest

from tests.support.harness import Admin, Api, eventually
from tests.web.test_auth import error_of

EVM = "evm_address"
TOKEN = {"address": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "chain_id": 1, "name": "USDC", "decimals": 6}
CONFIG = {
    "default_tier": "base",
    "tiers": [
        {"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0.05", "r3": "0.02", "r4": "0.01"}},
        {"id": "gold", "name": "Gold", "rank": 2, "rates": {"r1": "0.2", "r2": "0.1", "r3": "0", "r4": "0"}},
    ],
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
         "end_user_reward": {"fixed": "10"}},
        {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"}, "currency": TOKEN,
         "end_user_reward": {"rate": "0.5"}},
        {"event_name": "signup", "base": {"fixed": "100"}, "currency": "point"},
    ],
    "referral_reward": {"referrer": "50", "referred": "10"},
}  # fmt: skip
USDC = (TOKEN["address"], "1")  # an EarningItem's currency: its address and chain id (a string)
ALICE, BOB, CAROL, DAN = (f"0x{n:040x}" for n in (0xA11CE, 0xB0B, 0xCA401, 0xDA4))
JAN = "2026-01-{:02d}T10:00:00.000Z"


def user(identifier: str) -> dict:
    return {"user_identifier": identifier, "identifier_type": EVM}


def _typed(identifier: str) -> dict:
    return {"user_identifier": identifier, "user_identifier_type": EVM}


def usd(amount: str) -> dict:
    return {"amount": amount, "currency": {"name": "USD"}}


# What the events pay (r1 0.1, r2 0.05 of the base; ALICE's rebate takes 0.2 of each level-1 commission through it):
#   e1 Jan 10  Bob purchase, value 200      Bob 10 reward; Alice L1 20 = 16 kept + 4 rebate to Bob
#   e2 Jan 11  Carol purchase, value 50     Carol 10 reward; Bob L1 5; Alice L2 2.5
#   e3 Jan 12  Carol swap, revenue 100      base 30 USDC: Carol 15 USDC; Bob L1 3 USDC; Alice L2 1.5 USDC
#   e4 Jan 13  Bob swap, revenue 10         base 3 USDC: Bob 1.5 USDC; Alice L1 0.3 USDC = 0.24 kept + 0.06 to Bob
#   e5 Jan 14  Bob signup                   base 100: Alice L1 10 = 8 kept + 2 to Bob
# and the code uses: 50 to the code's owner, 10 to the user (Bob's use of ALICE, Carol's of Bob's code, Dan's of ALICE).
EVENTS = [
    {**_typed(BOB), "name": "purchase", "dedup_id": "e1", "timestamp": JAN.format(10), "args": {"value": usd("200")}},
    {**_typed(CAROL), "name": "purchase", "dedup_id": "e2", "timestamp": JAN.format(11), "args": {"value": usd("50")}},
    {**_typed(CAROL), "name": "swap", "dedup_id": "e3", "timestamp": JAN.format(12), "args": {"revenue": usd("100")}},
    {**_typed(BOB), "name": "swap", "dedup_id": "e4", "timestamp": JAN.format(13), "args": {"revenue": usd("10")}},
    {**_typed(BOB), "name": "signup", "dedup_id": "e5", "timestamp": JAN.format(14)},
]


@dataclass
class World:
    api: Api
    project_id: str
    bob_code: str
    checks: dict[str, str]  # Bob's claim checks by amount: 3000000 claimed, 1500000 closed, 60000 left open


def _use(api: Api, code: str, identifier: str) -> None:
    used = api.patch(f"/referral_codes/{code}/use", json={"user_identifier": identifier, "user_identifier_type": EVM})
    assert used.status_code == 200, used.text


def set_up(api: Api) -> tuple[str, dict[str, str]]:
    """The module's project: its configuration, referrals, events and Bob's claim checks moved along. Returns Bob's
    code and Bob's checks by amount."""
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    created = api.post("/affiliates", json={"address": ALICE, "identifier_type": EVM, "name": "ALICE", "code": "ALICE",
                                            "signature": "0x", "user_rebate_rate": 0.2})  # fmt: skip
    assert created.status_code == 201, created.text
    _use(api, "alice", BOB)
    generated = api.post("/referral_codes", json={"user_identifier": BOB, "user_identifier_type": EVM, "quantity": 1})
    bob_code = generated.json()[0]["code"]
    _use(api, bob_code, CAROL)
    _use(api, "ALICE", DAN)
    assert api.post("/events/batch", json={"events": EVENTS}).json() == {"ingested_events": len(EVENTS)}
    api.wait_processed(*(e["dedup_id"] for e in EVENTS))
    api.settle()  # the code uses too (the project's own partition)

    def bobs_checks() -> dict[str, str]:
        rows = api.get("/claim-checks/rewards-payouts", params={**_typed(BOB), "page_size": 100}).json()["results"]
        assert sorted(r["amount"] for r in rows) == ["1500000", "3000000", "60000"]
        return {r["amount"]: r["id"] for r in rows}

    checks = eventually(bobs_checks)
    closed = api.post("/claim-checks/close", json={**_typed(BOB), "claim_check_ids": [checks["3000000"],
                                                                                     checks["1500000"]]})  # fmt: skip
    assert closed.status_code == 200, closed.text
    claim = {"hash": "0x" + "ab" * 32, "claimed_at": "2026-02-01T00:00:00Z", "claim_check_ids": [checks["3000000"]]}
    assert api.post("/claim-checks/claims", json=claim).json() == {"claimed": 1}
    return bob_code, checks


@pytest.fixture(scope="module")
def world(server) -> World:
    admin = Admin(server)
    project_id = admin.project()
    api = Api(server, admin.key(project_id, "service_role"), project_id)
    bob_code, checks = set_up(api)
    yield World(api, project_id, bob_code, checks)
    api.close()


def read(api: Api, path: str, **params) -> dict | list:
    response = api.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def groups(answer: dict) -> list[tuple]:
    return [(r["conversion_name"], r["is_referrer"], r["total_amount"]) for r in answer["results"]]


# -- GET /payouts: by conversion ------------------------------------------------------------------------------


def test_points_by_conversion_sum_what_each_conversion_paid(world):
    def settled() -> dict:
        answer = read(world.api, "/payouts", type="point", **user(BOB))
        # Bob: as a referrer, Carol's purchase (L1 5) and her code use (50); as a user, his purchase's reward and
        # rebate (10 + 4), his signup's rebate (2), his own code use (10)
        assert groups(answer) == [("purchase", True, "5"), ("purchase", False, "14"), ("referral_reward", True, "50"),
                                  ("referral_reward", False, "10"), ("signup", False, "2")]  # fmt: skip
        return answer

    answer = eventually(settled)
    assert (answer["total_results"], answer["page"], answer["page_size"]) == (5, 1, 25)
    assert all(r["conversion_id"] == r["conversion_name"] for r in answer["results"])
    assert all(set(r) == {"is_referrer", "total_amount", "conversion_id", "conversion_name"} for r in answer["results"])

    # Alice: her share of the commissions (16 + 2.5 on purchases, 8 on the signup) and two code uses
    alice = read(world.api, "/payouts", type="point", **user(ALICE))
    assert groups(alice) == [("purchase", True, "18.5"), ("referral_reward", True, "100"), ("signup", True, "8")]


def test_token_payouts_by_conversion_carry_their_currency(world):
    bob = read(world.api, "/payouts", type="onchain-currency", **user(BOB))
    assert groups(bob) == [("swap", True, "3000000"), ("swap", False, "1560000")]  # 1.5 USDC reward + 0.06 rebate
    assert {(r["currency_address"], r["chain_id"]) for r in bob["results"]} == {USDC}
    alice = read(world.api, "/payouts", type="onchain-currency", **user(ALICE))
    assert groups(alice) == [("swap", True, "1740000")]  # 1.5 USDC at L2 + 0.24 kept at L1
    assert read(world.api, "/payouts", type="onchain-currency", **user(DAN)) == {
        "total_results": 0, "page": 1, "page_size": 25, "results": []}  # fmt: skip


def test_by_conversion_pages_and_windows(world):
    first, third, past = (
        read(world.api, "/payouts", type="point", **user(BOB), page=n, page_size=2) for n in (1, 3, 4)
    )
    assert groups(first) == [("purchase", True, "5"), ("purchase", False, "14")] and first["total_results"] == 5
    assert groups(third) == [("signup", False, "2")] and (third["page"], third["page_size"]) == (3, 2)
    assert past["results"] == [] and past["total_results"] == 5
    # from/to bound when the payouts happened (inclusive); a date alone as `to` takes in its whole day
    day = read(world.api, "/payouts", type="point", **user(BOB), **{"from": "2026-01-10", "to": "2026-01-10"})
    assert groups(day) == [("purchase", False, "14")]
    epoch_ms = read(world.api, "/payouts", type="point", **user(BOB), **{"from": "1768039200001"})  # after e1's time
    assert groups(epoch_ms) == [("purchase", True, "5"), ("referral_reward", True, "50"),
                                ("referral_reward", False, "10"), ("signup", False, "2")]  # fmt: skip
    # `user_identifier_type` is another name of `identifier_type`; `group_by` is accepted (always by conversion)
    other_name = read(world.api, "/payouts", type="point", user_identifier=BOB, user_identifier_type=EVM, group_by="x")
    assert groups(other_name) == groups(read(world.api, "/payouts", type="point", **user(BOB)))


# -- GET /payouts/movements ------------------------------------------------------------------------------------


def rows(answer: dict) -> list[tuple]:
    return [(r["date"][:10], r["conversion_name"], r["is_referrer"], r["total_amount"], r["payout_status"])
            for r in answer["results"]]  # fmt: skip


def test_point_movements_one_row_per_payout_newest_first(world):
    answer = read(world.api, "/payouts/movements", type="point", **user(BOB))
    listed = rows(answer)
    # the code uses happened now, after January's events: Carol's use of Bob's code came after Bob's own
    assert [r[1:] for r in listed[:2]] == [("referral_reward", True, "50", "paid"),
                                           ("referral_reward", False, "10", "paid")]  # fmt: skip
    assert listed[2:] == [
        ("2026-01-14", "signup", False, "2", "paid"),
        ("2026-01-11", "purchase", True, "5", "paid"),
        ("2026-01-10", "purchase", False, "4", "paid"),  # e1's rebate, written after its reward: newer first
        ("2026-01-10", "purchase", False, "10", "paid"),
    ]
    assert answer["total_results"] == 6
    first = answer["results"][2]
    assert first["date"] == "2026-01-14T10:00:00.000Z" and first["payout_status_details"] is None
    assert first["project_name"] == world.project_id and first["conversion_id"] == "signup"
    assert "currency_address" not in first and "chain_id" not in first  # the client's UserPointsMovement

    page2 = read(world.api, "/payouts/movements", type="point", **user(BOB), page=2, page_size=4)
    assert rows(page2) == listed[4:] and page2["total_results"] == 6
    window = read(world.api, "/payouts/movements", type="point", **user(BOB), from_date="2026-01-11",
                  to_date="2026-01-13")  # fmt: skip
    assert rows(window) == [("2026-01-11", "purchase", True, "5", "paid")]


def test_token_movements_carry_each_claim_checks_status(world):
    def statuses() -> dict:
        answer = read(world.api, "/payouts/movements", type="onchain-currency", **user(BOB))
        assert rows(answer) == [
            ("2026-01-13", "swap", False, "60000", "open"),  # the rebate: its check left open
            ("2026-01-13", "swap", False, "1500000", "closed"),
            ("2026-01-12", "swap", True, "3000000", "claimed"),
        ]
        return answer

    answer = eventually(statuses)
    assert {(r["currency_address"], r["chain_id"]) for r in answer["results"]} == {(TOKEN["address"], 1)}  # a number
    alice = read(world.api, "/payouts/movements", type="onchain-currency", **user(ALICE), to_date="2026-01-12")
    assert rows(alice) == [("2026-01-12", "swap", True, "1500000", "open")]


# -- GET /payouts/by-referrer ----------------------------------------------------------------------------------


def referred(answer: list) -> dict:
    assert all(len(item) == 1 for item in answer)
    return {key: value for item in answer for key, value in item.items()}


def earning(amount, address: str = "point", chain: str | None = None) -> dict:
    return {"currency": {"address": address, "chainId": chain}, "amount": amount}


def test_by_referrer_maps_each_level_to_the_user_it_came_through(world):
    referrer = {"user_identifier": ALICE, "user_identifier_type": EVM}
    active = referred(read(world.api, "/payouts/by-referrer", **referrer))
    assert list(active) == [BOB]  # Dan, referred, brought nothing
    bob = active[BOB]
    assert (bob["volume"], bob["direct_eligible_volume"], bob["indirect_eligible_volume"]) == (200, 200, 50)
    # L1: the commissions Alice kept on Bob's conversions (16 + 8 points, 0.24 USDC); L1-L4: with Carol's through him
    assert bob["earnings"] == [earning(24), earning(240000, *USDC)]
    assert bob["total_commission_earned"] == [earning(26.5), earning(1740000, *USDC)]
    assert (bob["event_referrer_identifier"], bob["referral_code"], bob["user_rebate_rate"]) == (ALICE, "ALICE", 0.2)
    assert bob["date_joined"].endswith("Z")

    everyone = referred(read(world.api, "/payouts/by-referrer", **referrer, referrer_scope="all"))
    assert list(everyone) == [BOB, DAN] and everyone[BOB] == bob
    assert everyone[DAN] == {
        "volume": 0, "direct_eligible_volume": 0, "indirect_eligible_volume": 0, "earnings": [],
        "total_commission_earned": [], "date_joined": everyone[DAN]["date_joined"], "event_referrer_identifier": ALICE,
        "user_rebate_rate": 0.2, "referral_code": "ALICE"}  # fmt: skip
    assert everyone[DAN]["date_joined"] > bob["date_joined"]  # Dan used the code after Bob

    window = referred(read(world.api, "/payouts/by-referrer", **referrer, from_date="2026-01-11", to_date="2026-01-12"))
    assert window[BOB]["date_joined"] == bob["date_joined"]  # all time, whatever the window
    assert (window[BOB]["volume"], window[BOB]["direct_eligible_volume"], window[BOB]["indirect_eligible_volume"]) == (
        0, 0, 50)  # fmt: skip
    assert window[BOB]["earnings"] == []
    assert window[BOB]["total_commission_earned"] == [earning(2.5), earning(1500000, *USDC)]

    carol = referred(read(world.api, "/payouts/by-referrer", user_identifier=BOB, user_identifier_type=EVM))[CAROL]
    assert (carol["volume"], carol["direct_eligible_volume"], carol["indirect_eligible_volume"]) == (50, 50, 0)
    assert carol["earnings"] == carol["total_commission_earned"] == [earning(5), earning(3000000, *USDC)]
    assert (carol["referral_code"], carol["user_rebate_rate"]) == (world.bob_code, None)
    assert read(world.api, "/payouts/by-referrer", user_identifier=DAN, user_identifier_type=EVM) == []


# Amounts of 30 integer digits and 18 decimals: a float keeps 17 significant digits of them.
HUGE_VALUE = "123456789012345678901234567890.123456789012345670"
HUGE_COMMISSION = "12345678901234567890123456789.012345678901234567"  # Alice's r1, 0.1 of it


def test_by_referrer_answers_exact_numbers_digit_for_digit(world):
    admin = Admin(world.api.server)
    other = admin.project()
    with Api(world.api.server, admin.key(other, "service_role"), other) as api:
        assert api.put("/projects/config", json=CONFIG).status_code == 200
        code = api.post("/referral_codes", json={**_typed(ALICE), "quantity": 1}).json()[0]["code"]
        _use(api, code, BOB)
        purchase = {**_typed(BOB), "name": "purchase", "dedup_id": "huge", "args": {"value": usd(HUGE_VALUE)}}
        assert api.post("/events/batch", json={"events": [purchase]}).status_code == 200
        api.wait_processed("huge")
        api.settle()  # Bob's code use too (the project's own partition)
        answer = api.get("/payouts/by-referrer", params=_typed(ALICE))
        assert answer.status_code == 200, answer.text
        bob = referred(json.loads(answer.text, parse_float=Decimal))[BOB]
        assert (bob["volume"], bob["direct_eligible_volume"]) == (Decimal(HUGE_VALUE), Decimal(HUGE_VALUE))
        assert bob["earnings"] == [earning(Decimal(HUGE_COMMISSION))]
        assert f'"volume":{HUGE_VALUE.rstrip("0")},' in answer.text  # a JSON number, every digit


# -- the project, and bad input --------------------------------------------------------------------------------


def test_project_id_must_be_the_keys_project(world):
    dashed = str(uuid.UUID(world.project_id))  # another spelling of the same project
    assert groups(read(world.api, "/payouts", type="point", **user(BOB), project_id=dashed))
    other = uuid.uuid4().hex
    for path in ("/payouts", "/payouts/movements"):
        assert error_of(world.api.get(path, params={"type": "point", **user(BOB), "project_id": other}), 403) == (
            "project_id is not this key's project")  # fmt: skip


def test_another_projects_key_sees_none_of_it(world):
    admin = Admin(world.api.server)
    other = admin.project()
    with Api(world.api.server, admin.key(other), other) as api:
        assert read(api, "/payouts", type="point", **user(BOB))["results"] == []
        assert read(api, "/payouts/movements", type="onchain-currency", **user(BOB))["results"] == []
        assert read(api, "/payouts/by-referrer", user_identifier=ALICE, user_identifier_type=EVM) == []


@pytest.mark.parametrize(
    ("path", "params", "message"),
    [
        ("/payouts", {**user(BOB)}, "type is required"),
        ("/payouts", {**user(BOB), "type": "points"}, "type must be one of: 'point' or 'onchain-currency'"),
        ("/payouts", {"type": "point", "identifier_type": EVM}, "user_identifier is required"),
        ("/payouts", {"type": "point", "user_identifier": "bob", "identifier_type": EVM}, None),
        ("/payouts", {"type": "point", **user(BOB), "from": "yesterday"}, "from must be an ISO 8601 date or timestamp"),
        ("/payouts", {"type": "point", **user(BOB), "from": "2026-02-01", "to": "2026-01-01"},
         "from must not be after to"),
        ("/payouts", {"type": "point", **user(BOB), "page_size": 101}, "page_size must not be greater than 100"),
        ("/payouts/movements", {"type": "point", **user(BOB), "page": 0}, "page must not be less than 1"),
        ("/payouts/movements", {"type": "point", **user(BOB), "to_date": "13/01/2026"}, "to_date must be an ISO"),
        ("/payouts/by-referrer", {**_typed(ALICE), "referrer_scope": "some"}, "referrer_scope must be one of"),
        ("/payouts/by-referrer", {**_typed(ALICE), "from_date": "soon"}, "from_date must be an ISO 8601 date"),
        ("/payouts/by-referrer", {**_typed(ALICE), "from_date": "2026-02-01", "to_date": "2026-01-01"},
         "from_date must not be after to_date"),
        ("/payouts/by-referrer", {"user_identifier": ALICE, "user_identifier_type": "fax"}, None),
    ],
)  # fmt: skip
def test_bad_input_is_a_400_naming_it(world, path, params, message):
    found = error_of(world.api.get(path, params=params), 400)
    assert message is None or str(found).startswith(message), found
