"""API.md §9's reversals on both shapes (POST /events/reversals): all or nothing, repeats counted once, the 404 and
409 of §9, hostile fractions and reasons, and an event's payouts over four levels, a rebate and a campaign bonus
taken back digit for digit in every figure."""

import pytest

from tests.conftest import event, evm
from tests.support.harness import Admin, Api, eventually
from tests.web.test_auth import error_of

EVM = "evm_address"
BUYER, L1, L2, L3, L4 = evm(1), evm(2), evm(3), evm(4), evm(5)
TIERS = [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0.05", "r3": "0.02", "r4": "0.01"}}]
CONFIG = {
    "default_tier": "base",
    "tiers": TIERS,
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "end_user_reward": {"fixed": "10"}}
    ],
    "campaigns": [{"id": "launch", "event_names": ["purchase"], "starts_at": "2020-01-01T00:00:00Z",
                   "ends_at": "2100-01-01T00:00:00Z", "bonus": "5"}],
}  # fmt: skip


def typed(identifier: str) -> dict:
    return {"user_identifier": identifier, "user_identifier_type": EVM}


def purchase(dedup_id: str, value: str = "1000") -> dict:
    return {**event(dedup_id, BUYER), "args": {"value": {"amount": value, "currency": {"name": "USD"}}}}


def reverse(api: Api, *items: dict):
    return api.post("/events/reversals", json={"reversals": list(items)})


def status(api: Api, dedup_id: str) -> str:
    return api.get("/events/status", params={"dedup_id": dedup_id}).json()["status"]


def wait_status(api: Api, dedup_id: str, expected: str) -> None:
    def reached() -> None:
        assert status(api, dedup_id) == expected

    eventually(reached)


def points(api: Api, user: str) -> str:
    return api.get(f"/payouts/totals/{user}", params={"identifier_type": EVM}).json()["total_points"]


@pytest.fixture(scope="module")
def world(server):
    """A project whose buyer is referred through L1's affiliate code (a rebate of 0.2) under L2, L3 and L4."""
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    codes = {}
    for owner in (L2, L3, L4):
        registered = api.post("/affiliates", json={**typed(owner), "name": owner[-1]})
        assert registered.status_code == 201, registered.text
        codes[owner] = api.post("/referral_codes", json={**typed(owner), "quantity": 1}).json()[0]["code"]
    created = api.post("/affiliates", json={"address": L1, "identifier_type": EVM, "name": "L1", "code": "LEVEL1",
                                            "signature": "0x", "user_rebate_rate": 0.2})  # fmt: skip
    assert created.status_code == 201, created.text
    for code, user in ((codes[L4], L3), (codes[L3], L2), (codes[L2], L1), ("LEVEL1", BUYER)):
        used = api.patch(f"/referral_codes/{code}/use", json=typed(user))
        assert used.status_code == 200, used.text
    api.close()
    return server, admin, project


@pytest.fixture
def chain(world):
    """The project, through a key of its own per test (reversals are limited to 10 a minute per key)."""
    server, admin, project = world
    api = Api(server, admin.key(project, "service_role"), project)
    yield api
    api.close()


def test_a_reversal_takes_back_its_share_of_every_payout(chain: Api):
    assert chain.post("/events/batch", json={"events": [purchase("r-1")]}).status_code == 200
    chain.wait_processed("r-1")
    before = {user: points(chain, user) for user in (BUYER, L1, L2, L3, L4)}
    # L1: 100 commission less the 0.2 rebate; the buyer: 10 reward + 5 bonus + 20 rebate.
    assert before == {BUYER: "35", L1: "80", L2: "50", L3: "20", L4: "10"}, before
    answer = reverse(chain, {"dedup_id": "r-1", "reason": "refund", "fraction": "0.3"})
    assert answer.status_code == 200 and answer.json() == {"reversed": 1}, answer.text
    wait_status(chain, "r-1", "partially_reversed")
    after = {user: points(chain, user) for user in (BUYER, L1, L2, L3, L4)}
    assert after == {BUYER: "24.5", L1: "56", L2: "35", L3: "14", L4: "7"}, after
    assert reverse(chain, {"dedup_id": "r-1", "reason": "refund", "fraction": "0.3"}).json() == {"reversed": 0}
    assert reverse(chain, {"dedup_id": "r-1", "reason": "rest", "fraction": "0.7"}).json() == {"reversed": 1}
    wait_status(chain, "r-1", "reversed")
    assert {user: points(chain, user) for user in (BUYER, L1, L2, L3, L4)} == dict.fromkeys(after, "0")


def figure_reads(project_id: str) -> list[tuple[str, dict]]:
    """Every read that shows what the chain earned or moved: amounts, volumes, ranks."""
    chain = (BUYER, L1, L2, L3, L4)
    per_user = [(f"/payouts/totals/{u}", {"identifier_type": EVM}) for u in chain]
    per_user += [(path, {"type": "point", "user_identifier": u, "identifier_type": EVM, "page_size": 100})
                 for u in chain for path in ("/payouts",)]  # fmt: skip
    per_user += [("/payouts/by-referrer", typed(u)) for u in chain[1:]]
    portal = ("/affiliate-portal/stats", "/affiliate-portal/paid-volumes-by-level", "/affiliate-portal/new-traders",
              "/affiliate-portal/referral-tree")  # fmt: skip
    per_user += [(path, {"user_identifier": u}) for u in chain[1:] for path in portal]
    per_user += [("/affiliate-portal/stats-breakdown", {"user_identifier": u, "group_by": "day", "date_range": "7d"})
                 for u in chain[1:]]  # fmt: skip
    boards = [
        ("/payouts/leaderboard/payouts", {}), ("/payouts/leaderboard/payouts", {"user_type": "end_user"}),
        ("/payouts/leaderboard/users", {}), ("/payouts/leaderboard/users", {"user_type": "affiliate"}),
        ("/payouts/leaderboard/points", {}), ("/payouts/leaderboard/volume", {}),
        ("/payouts/leaderboard/volume", {"user_type": "affiliate"}), ("/payouts/leaderboard/revenue", {}),
        ("/leaderboard/referred", {}), ("/payouts/leaderboard/referred-volume", {"user_identifiers": ",".join(chain)}),
    ]  # fmt: skip
    return [("/payouts/summary", {"currency": "point"}), *boards, *per_user, ("/affiliate-portal/total-stats", {}),
            ("/affiliates", {"per_page": 100})]  # fmt: skip


def snapshot(api: Api) -> dict[str, object]:
    """Each read's answer flattened to {"<read> <path in the answer>": value}."""
    flat: dict[str, object] = {}

    def walk(prefix: str, value: object) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}", item)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(f"{prefix}[{index}]", item)
        else:
            flat[prefix] = value

    for path, params in figure_reads(api.project_id):
        answer = api.get(path, params=params)
        assert answer.status_code == 200, (path, answer.text)
        walk(f"{path}?{sorted(params.items())}", answer.json())
    return flat


def test_every_figure_drops_by_exactly_what_was_taken_back(chain: Api):
    assert chain.post("/events/batch", json={"events": [purchase("f-0", "300")]}).status_code == 200
    chain.wait_processed("f-0")
    chain.settle()  # the chain's code uses too (the project's own partition)
    kept = eventually(lambda: snapshot(chain))
    assert chain.post("/events/batch", json={"events": [purchase("f-1", "1000")]}).status_code == 200
    chain.wait_processed("f-1")
    paid = snapshot(chain)
    assert reverse(chain, {"dedup_id": "f-1", "reason": "refund", "fraction": "1"}).json() == {"reversed": 1}
    wait_status(chain, "f-1", "reversed")
    back = snapshot(chain)
    # Every amount and volume is back to what it was before f-1; what counts events still counts it; the times of
    # the answers move on.
    counts = {key for key in paid if key.rpartition(".")[2].endswith("attributions")}
    times = {key for key in paid if key.endswith(".calculated_at")}
    differ = sorted(key for key in (set(kept) | set(back)) - counts - times if kept.get(key) != back.get(key))
    assert differ == [], "\n".join(f"{k}: {kept.get(k)!r} / {paid.get(k)!r} / {back.get(k)!r}" for k in differ)
    assert {key: back[key] for key in counts} == {key: paid[key] for key in counts}
    assert any(kept[key] != paid[key] for key in counts) and len(counts) > 10


def test_a_reversal_sent_right_after_its_event_is_applied_once_the_event_is_processed(chain: Api):
    assert chain.post("/events/batch", json={"events": [purchase("race-1", "100")]}).status_code == 200
    assert reverse(chain, {"dedup_id": "race-1", "reason": "cancelled", "fraction": "0.5"}).json() == {"reversed": 1}
    wait_status(chain, "race-1", "partially_reversed")
    answer = chain.get("/payouts/movements", params={"type": "point", "user_identifier": L4, "identifier_type": EVM,
                                                      "page_size": 100})  # fmt: skip
    race = [(r["total_amount"], r["reversal"]) for r in answer.json()["results"] if "race-1" in r["id"]]
    assert sorted(race) == [("-0.5", True), ("1", False)]  # L4's 0.01 of 100, half taken back


def test_unknown_events_and_shares_past_1_apply_nothing(chain: Api):
    assert chain.post("/events/batch", json={"events": [purchase("all-1", "100")]}).status_code == 200
    chain.wait_processed("all-1")
    half = {"dedup_id": "all-1", "reason": "refund", "fraction": "0.5"}
    unknown = reverse(chain, half, {"dedup_id": "nope-1", "reason": "refund"}, {"dedup_id": "nope-2", "reason": "x"})
    missing = "not found (unknown, or not accepted yet)"
    assert error_of(unknown, 404) == [f"event nope-1 {missing}", f"event nope-2 {missing}"]
    past = reverse(chain, half, {"dedup_id": "all-1", "reason": "chargeback", "fraction": "0.6"})
    assert error_of(past, 409) == "event all-1: its reversals would sum past 1"
    assert status(chain, "all-1") == "processed"  # nothing of either request was applied
    assert reverse(chain, {"dedup_id": "all-1", "reason": "whole", "fraction": "1"}).json() == {"reversed": 1}
    wait_status(chain, "all-1", "reversed")
    assert error_of(reverse(chain, half), 409) == "event all-1: its reversals would sum past 1"


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"fraction": "1e-30"}, "reversals[0].fraction must be a plain non-negative decimal"),
        ({"fraction": 1e-30}, "reversals[0].fraction must be a plain non-negative decimal"),
        ({"fraction": "0"}, "reversals[0].fraction must be above 0 and at most 1"),
        ({"fraction": "1.0000000000000000001"}, "reversals[0].fraction must have at most 18 fractional digits"),
        ({"fraction": "1.000000000000000001"}, "reversals[0].fraction must be above 0 and at most 1"),
        ({"fraction": "-0.5"}, "reversals[0].fraction must be a plain non-negative decimal"),
        ({"fraction": True}, "reversals[0].fraction must be a decimal string"),
        ({"reason": "x" * 10_240}, "reversals[0].reason must be at most 1000 characters"),
        ({"reason": ""}, "reversals[0].reason must be a non-empty string"),
        ({"dedup_id": "d" * 256}, "reversals[0].dedup_id must be a string of 1 to 255 characters"),
        ({"amount": "5"}, "reversals[0].amount is not a field of a reversal"),
    ],
)
def test_hostile_fields_are_400_naming_them(chain: Api, item: dict, message: str):
    answer = reverse(chain, {"dedup_id": "r-1", "reason": "refund", **item})
    assert error_of(answer, 400).startswith(message)


def test_bodies_out_of_shape_are_400(chain: Api):
    items = [{"dedup_id": f"e-{n}", "reason": "refund"} for n in range(101)]
    assert error_of(chain.post("/events/reversals", json={"reversals": items}), 400) == (
        "reversals must be a list of 1 to 100 reversals"
    )
    for body in ({"reversals": []}, {"reversals": {}}, [], {"reversals": [], "extra": 1}):
        assert chain.post("/events/reversals", json=body).status_code == 400


def test_100_reversals_of_one_event_take_it_back_whole(chain: Api):
    assert chain.post("/events/batch", json={"events": [purchase("hundred-1", "300")]}).status_code == 200
    chain.wait_processed("hundred-1")
    items = [{"dedup_id": "hundred-1", "reason": f"part {n}", "fraction": "0.01"} for n in range(100)]
    assert reverse(chain, *items).json() == {"reversed": 100}
    assert reverse(chain, *items).json() == {"reversed": 0}  # sent again: each applied once
    wait_status(chain, "hundred-1", "reversed")
    answer = chain.get("/payouts", params={"type": "point", "user_identifier": L2, "identifier_type": EVM})
    assert answer.status_code == 200


LIMITED = {
    "default_tier": "base",
    "tiers": TIERS,
    "conversions": [{"event_name": "purchase", "base": {"fixed": "0"}, "end_user_reward": {"fixed": "10"}}],
    "caps": [{"applies_to": "end_user", "currency": "point", "amount": "15", "window": "calendar_month"}],
    "budgets": [{"currency": "point", "amount": "25"}],
}


def test_caps_and_budgets_get_the_amount_back(world):
    server, admin, _ = world
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    answer = api.put("/projects/config", json=LIMITED)
    assert answer.status_code == 200, answer.text
    for dedup_id in ("cap-1", "cap-2"):
        assert api.post("/events/batch", json={"events": [event(dedup_id, BUYER)]}).status_code == 200
        api.wait_processed(dedup_id)
    assert points(api, BUYER) == "15"  # 10, then 5 of 10 (the month's cap)
    assert reverse(api, {"dedup_id": "cap-1", "reason": "refund"}).json() == {"reversed": 1}
    wait_status(api, "cap-1", "reversed")
    assert points(api, BUYER) == "5"
    assert api.post("/events/batch", json={"events": [event("cap-3", BUYER)]}).status_code == 200
    api.wait_processed("cap-3")
    assert points(api, BUYER) == "15"  # the cap's room back: paid whole
    assert api.get("/projects/budgets").json() == [
        {"currency": "point", "amount": "25", "paid": "15", "reserved": "0", "remaining": "10"}
    ]
    api.close()


def test_a_payout_made_before_its_cap_was_set_gives_it_nothing_back(world):
    """Its units were never counted in the cap: giving them back would make room for more than the cap."""
    server, admin, _ = world
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    uncapped = {key: value for key, value in LIMITED.items() if key not in ("caps", "budgets")}
    cap = {"applies_to": "end_user", "currency": "point", "amount": "15", "window": "all_time"}
    capped = {**uncapped, "caps": [cap]}

    def buy(dedup_id: str) -> None:
        assert api.post("/events/batch", json={"events": [event(dedup_id, BUYER)]}).status_code == 200
        api.wait_processed(dedup_id)

    assert api.put("/projects/config", json=uncapped).status_code == 200
    buy("before-cap")
    assert api.put("/projects/config", json=capped).status_code == 200
    buy("capped-1")
    buy("capped-2")
    assert points(api, BUYER) == "25"  # 10 before the cap, then 10 and 5 of 10 (the cap's 15)
    assert reverse(api, {"dedup_id": "before-cap", "reason": "refund"}).json() == {"reversed": 1}
    wait_status(api, "before-cap", "reversed")
    buy("capped-3")
    assert points(api, BUYER) == "15"  # the cap still full: nothing of capped-3 paid
    assert reverse(api, {"dedup_id": "capped-1", "reason": "refund"}).json() == {"reversed": 1}
    wait_status(api, "capped-1", "reversed")
    buy("capped-4")
    assert points(api, BUYER) == "15"  # 5, then capped-4's 10 in the room capped-1 gave back
    api.close()


USDC = {"address": "0xA0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "chain_id": 1, "name": "USDC", "decimals": 6}
TOKENS = {
    "default_tier": "base",
    "tiers": TIERS,
    "conversions": [{"event_name": "swap", "base": {"fixed": "3"}, "currency": USDC,
                     "end_user_reward": {"rate": "1"}}],
}  # fmt: skip


def test_token_payouts_come_out_of_open_checks_and_closed_ones_leave_a_debt(world):
    server, admin, _ = world
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=TOKENS).status_code == 200

    def swap(dedup_id: str) -> None:
        assert api.post("/events/batch", json={"events": [event(dedup_id, BUYER, "swap")]}).status_code == 200
        api.wait_processed(dedup_id)

    def checks() -> dict[str, tuple[str, str]]:
        rows = api.get("/claim-checks/rewards-payouts", params={**typed(BUYER), "page_size": 100}).json()["results"]
        return {row["id"]: (row["amount"], row["status"]) for row in rows}

    def totals() -> dict:
        answer = api.get("/claim-checks/totals", params=typed(BUYER)).json()
        return {group: [(row["amount"], row.get("status")) for row in rows] for group, rows in answer.items()}

    swap("t-1")  # its check closed and claimed
    [claimed] = eventually(lambda: list(checks()))
    assert api.post("/claim-checks/close", json={**typed(BUYER), "claim_check_ids": [claimed]}).status_code == 200
    claim = {"hash": "0x" + "cd" * 32, "claimed_at": "2026-11-01T00:00:00Z", "claim_check_ids": [claimed]}
    assert api.post("/claim-checks/claims", json=claim).json() == {"claimed": 1}
    swap("t-2")  # its check open
    items = [{"dedup_id": "t-1", "reason": "refund"}, {"dedup_id": "t-2", "reason": "refund", "fraction": "0.5"}]
    assert reverse(api, *items).json() == {"reversed": 2}
    wait_status(api, "t-1", "reversed")
    wait_status(api, "t-2", "partially_reversed")
    assert totals() == {"claimed": [("3000000", "claimed")], "unclaimed": [("1500000", "unclaimed")],
                        "debt": [("3000000", None)]}  # fmt: skip
    swap("t-3")  # its 3,000,000 settles the debt: no check opens
    assert totals() == {"claimed": [("3000000", "claimed")], "unclaimed": [("1500000", "unclaimed")], "debt": []}
    swap("t-4")
    assert totals()["unclaimed"] == [("4500000", "unclaimed")]
    api.close()


def test_the_console_lists_what_reversals_took_back(world):
    server, admin, _ = world
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    assert api.post("/events/batch", json={"events": [purchase("console-1", "100")]}).status_code == 200
    api.wait_processed("console-1")  # the buyer alone, unreferred here: 10 reward + 5 bonus
    assert reverse(api, {"dedup_id": "console-1", "reason": "chargeback", "fraction": "0.2"}).status_code == 200
    wait_status(api, "console-1", "partially_reversed")
    body = api.get("/console/integrity").json()
    assert body["reversed"] == [{"currency": "point", "movements": 2, "amount": "3"}]
    [latest] = body["latest_reversals"]
    assert (latest["dedup_id"], latest["reason"], latest["fraction"], latest["reversed"]) == (
        "console-1", "chargeback", "0.2", "0.2")  # fmt: skip
    api.close()
