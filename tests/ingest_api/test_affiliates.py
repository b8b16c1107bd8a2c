"""API.md §4: affiliate registration and the listing: figures, windows, filters, search, sorting, pages."""

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from rewards.domain.timestamps import now_ms
from tests.conftest import SERVICE, evm
from tests.ingest_api.test_referral_codes import create, user
from tests.query_api.test_payouts import CONFIG, purchase, totals
from tests.support.harness import Api, eventually
from tests.web.test_auth import error_of

DAY_MS = 86_400_000
OLD_MS = now_ms() - 100 * DAY_MS
A, B, C, D, E, F = 1, 2, 3, 4, 5, 6  # users by number; A, B, C and E register as affiliates
AFFILIATES = {
    A: {"name": "Alice", "status": "active", "region": "EU", "audience": "crypto", "tax_status": "verified"},
    B: {"name": "Bob", "status": "pending", "region": "US", "audience": "gaming", "tax_status": "pending",
        "tier": "gold"},
    C: {"name": "Carol", "status": "active", "region": "US", "audience": "crypto", "tax_status": "exempt",
        "tier": "gold"},
    E: {"name": "Eve", "status": "suspended", "region": "EU", "audience": "gaming", "tax_status": "missing",
        "tier": "base"},
}  # fmt: skip


def register(api, n: int, **fields):
    return api.post("/affiliates", json={**user(n), **fields})


def use_code(api, owner: int, referred: int) -> str:
    code = create(api, owner=user(owner), quantity=1)[0]["code"]
    assert api.patch(f"/referral_codes/{code}/use", json=user(referred)).status_code == 200
    return code


@pytest.fixture(scope="module")
def listed(server, admin) -> Iterator[tuple[Api, dict[int, str]]]:
    """The scenario, built once per shape for the tests that only read the listing (2 s each when each built its own),
    in a project of its own; and its codes."""
    project = admin.project()
    with Api(server, admin.key(project, SERVICE), project) as api:
        yield api, scenario(api)


def scenario(api) -> dict[int, str]:
    """A refers B, B refers C and F, C refers D. D buys 100 now and 1000 a hundred days ago; F buys 10;
    B buys 5. Rates are those of L1's tier (B and C gold, A base by default):
      A: r1 5, r2 10, r3 1100; earnings 50 + 5 + 50 + 1 + 0.5 = 106.5; referred 1
      B: r1 10, r2 1100; earnings 50 + 50 + 10 + 100 + 2 = 212; referred 2
      C: r1 1100; earnings 50 + 20 + 200 = 270; referred 1
      E: nothing."""
    api.put("/projects/config", json=CONFIG)
    for n, fields in AFFILIATES.items():
        assert register(api, n, **fields).status_code == 201
    codes = {A: use_code(api, A, B), B: use_code(api, B, C), C: use_code(api, C, D)}
    use_code(api, B, F)
    events = [purchase("now", D, "100"), purchase("old", D, "1000", timestamp=OLD_MS), purchase("f", F, "10"),
              purchase("b", B, "5")]  # fmt: skip
    assert api.post("/events/batch", json={"events": events}).json() == {"ingested_events": 4}
    api.wait_processed("now", "old", "f", "b")
    api.settle()  # the affiliates and code uses too (on the project's own partition)
    return codes


def listing(api, **params) -> dict:
    response = api.get("/affiliates", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def names(api, **params) -> list[str]:
    return [a["name"] for a in listing(api, **params)["results"]]


def figures(affiliate: dict) -> tuple:
    keys = ("r1_volume", "r2_volume", "r3_volume", "r4_volume", "total_volume", "total_earnings", "referred_users")
    return tuple(affiliate[k] for k in keys)


def test_register_answers_the_affiliate_and_409_twice(api):
    api.put("/projects/config", json=CONFIG)
    body = register(api, A, name="Alice", region="EU").json()
    assert body["id"] and body["user_identifier"] == evm(A) and body["name"] == "Alice"
    assert (body["status"], body["tax_status"], body["region"], body["audience"]) == ("active", "missing", "EU", None)
    assert body["tier"] == {"id": "base", "name": "Base", "rank": 1}  # the default tier
    assert (body["r1"], body["r2"], body["r3"], body["r4"]) == (0.1, 0.05, 0.02, 0.01)
    assert figures(body) == ("0", "0", "0", "0", "0", "0", 0) and body["codes"] == []
    assert body["created_at"].endswith("Z")
    assert error_of(register(api, A), 409)
    assert error_of(register(api, B, tier="platinum"), 400)
    assert error_of(register(api, B, status="retired"), 400)
    assert error_of(register(api, B, colour="red"), 400)
    bad_address = {"user_identifier": "nope", "user_identifier_type": "evm_address"}
    assert error_of(api.post("/affiliates", json=bad_address), 400)


def test_register_counts_what_the_user_did_before(api):
    api.put("/projects/config", json=CONFIG)
    code = use_code(api, A, B)
    api.post("/events/batch", json={"events": [purchase("p", B, "40")]})
    api.wait_processed("p")
    body = register(api, A, tier="gold").json()
    assert figures(body) == ("40", "0", "0", "0", "40", "54", 1)  # 50 referral reward + 40 × 0.1 (tier then)
    assert body["codes"] == [code] and body["tier"]["id"] == "gold" and body["r1"] == 0.2


def test_listing_figures_rates_codes_and_tiers(listed):
    api, codes = listed
    page = listing(api)
    assert (page["page"], page["per_page"], page["total_count"], page["total_pages"]) == (1, 25, 4, 1)
    by_name = {a["name"]: a for a in page["results"]}
    assert figures(by_name["Alice"]) == ("5", "10", "1100", "0", "1115", "106.5", 1)
    assert figures(by_name["Bob"]) == ("10", "1100", "0", "0", "1110", "212", 2)
    assert figures(by_name["Carol"]) == ("1100", "0", "0", "0", "1100", "270", 1)
    assert figures(by_name["Eve"]) == ("0", "0", "0", "0", "0", "0", 0)
    assert by_name["Alice"]["tier"] == {"id": "base", "name": "Base", "rank": 1} and by_name["Alice"]["r1"] == 0.1
    assert by_name["Bob"]["tier"]["id"] == "gold" and (by_name["Bob"]["r1"], by_name["Bob"]["r4"]) == (0.2, 0.02)
    assert by_name["Alice"]["codes"] == [codes[A]] and len(by_name["Bob"]["codes"]) == 2
    assert by_name["Eve"]["codes"] == [] and by_name["Carol"]["status"] == "active"


def test_windows_count_volumes_and_earnings_of_their_days_only(listed):
    api, _ = listed

    def by_name(**params) -> dict:
        return {a["name"]: figures(a) for a in listing(api, **params)["results"]}

    recent = by_name(dateRange="7d")
    assert recent["Alice"] == ("5", "10", "100", "0", "115", "56.5", 1)  # referred users are all time
    assert recent["Bob"] == ("10", "100", "0", "0", "110", "112", 2)
    assert recent["Carol"] == ("100", "0", "0", "0", "100", "70", 1)
    assert by_name(dateRange="30d") == recent == by_name(dateRange="90d")
    assert by_name(dateRange="1y") == by_name(dateRange="all") == by_name()
    old_day = datetime.fromtimestamp(OLD_MS / 1000, tz=UTC).date()
    only_old = by_name(dateFrom=old_day.isoformat(), dateTo=old_day.isoformat(), dateRange="7d")  # both override
    assert only_old["Carol"] == ("1000", "0", "0", "0", "1000", "200", 1)
    assert only_old["Alice"] == ("0", "0", "1000", "0", "1000", "50", 1)
    future = by_name(dateFrom="2299-01-01")
    assert future["Bob"] == ("0", "0", "0", "0", "0", "0", 2)  # nothing in the window, referrals still count
    day_after = (old_day + timedelta(days=1)).isoformat()
    assert by_name(dateFrom=day_after)["Carol"][0] == "100"  # one bound alone leaves the other side open
    assert by_name(dateTo=old_day.isoformat())["Carol"][0] == "1000"


def test_filters_or_within_and_across(listed):
    api, _ = listed
    assert sorted(names(api, statuses="active")) == ["Alice", "Carol"]
    assert sorted(names(api, statuses="active,pending")) == ["Alice", "Bob", "Carol"]
    assert sorted(names(api, regions="EU")) == ["Alice", "Eve"]
    assert names(api, regions="US", statuses="active") == ["Carol"]
    assert sorted(names(api, audiences="gaming")) == ["Bob", "Eve"]
    assert sorted(names(api, tiers="gold")) == ["Bob", "Carol"]
    assert sorted(names(api, tiers="base")) == ["Alice", "Eve"]  # Alice's tier is the default one
    assert sorted(names(api, tax_statuses="verified,exempt")) == ["Alice", "Carol"]
    assert names(api, regions="Mars") == [] and listing(api, regions="Mars")["total_count"] == 0
    assert sorted(names(api, statuses="")) == ["Alice", "Bob", "Carol", "Eve"]  # an empty filter filters nothing


def test_search_name_identifier_or_code_case_insensitive(listed):
    api, codes = listed
    assert names(api, query="ALI") == ["Alice"]
    assert names(api, query=evm(E).upper().replace("0X", "0x")) == ["Eve"]
    assert names(api, query=codes[C].lower()) == ["Carol"]
    assert names(api, query="nobody") == []


@pytest.mark.parametrize(
    ("sort_by", "sort_order", "expected"),
    [
        ("total_volume", "desc", ["Alice", "Bob", "Carol", "Eve"]),
        ("total_volume", "asc", ["Eve", "Carol", "Bob", "Alice"]),
        ("r1_volume", "desc", ["Carol", "Bob", "Alice", "Eve"]),
        ("volume", "desc", ["Carol", "Bob", "Alice", "Eve"]),
        ("r2_volume", "desc", ["Bob", "Alice", "Eve", "Carol"]),  # ties: newest first
        ("r3_volume", "desc", ["Alice", "Eve", "Carol", "Bob"]),
        ("r4_volume", "asc", ["Eve", "Carol", "Bob", "Alice"]),
        ("total_earnings", "desc", ["Carol", "Bob", "Alice", "Eve"]),
        ("referred_users", "desc", ["Bob", "Carol", "Alice", "Eve"]),
        ("created_at", "asc", ["Alice", "Bob", "Carol", "Eve"]),
        ("created_at", "desc", ["Eve", "Carol", "Bob", "Alice"]),
        ("name", "asc", ["Alice", "Bob", "Carol", "Eve"]),
        ("name", "desc", ["Eve", "Carol", "Bob", "Alice"]),
    ],
)
def test_sort_keys(listed, sort_by, sort_order, expected):
    api, _ = listed
    assert names(api, sort_by=sort_by, sort_order=sort_order) == expected


def test_default_sort_is_total_volume_desc_and_pages(listed):
    api, _ = listed
    assert names(api) == ["Alice", "Bob", "Carol", "Eve"]
    page = listing(api, per_page=10, page=2)
    assert (page["results"], page["total_count"], page["total_pages"], page["per_page"]) == ([], 4, 1, 10)
    for per_page in (10, 25, 50, 100):
        assert listing(api, per_page=per_page)["per_page"] == per_page


@pytest.mark.parametrize(
    "params",
    [
        {"per_page": 7}, {"per_page": 0}, {"per_page": "x"}, {"page": 0}, {"page": "x"},
        {"sort_by": "height"}, {"sort_order": "up"}, {"statuses": "active,retired"}, {"tax_statuses": "paid"},
        {"tiers": "platinum"}, {"dateRange": "2w"}, {"dateFrom": "yesterday"}, {"dateTo": "2026-13-01"},
        {"dateFrom": "2026-02-01", "dateTo": "2026-01-01"}, {"query": "x" * 300},
    ],
)  # fmt: skip
def test_listing_rejects_other_values(api, params):
    api.put("/projects/config", json=CONFIG)
    assert isinstance(error_of(api.get("/affiliates", params=params), 400), str | list)


def test_unknown_parameters_are_ignored(api):
    assert listing(api, colour="red")["total_count"] == 0


def test_service_role_only_and_projects_apart(api, make_api, admin):
    standard = make_api()
    assert error_of(standard.get("/affiliates"), 403) and error_of(standard.post("/affiliates", json=user(1)), 403)
    register(api, A, name="Alice")
    other = make_api("service_role", project_id=admin.project())
    assert register(other, A, name="Alice elsewhere").status_code == 201  # the same user, another project
    eventually(lambda: _assert_names(api, ["Alice"]))
    eventually(lambda: _assert_names(other, ["Alice elsewhere"]))


def _assert_names(api, expected: list[str]) -> None:
    assert names(api) == expected


# -- affiliate codes (API.md §7): the published client's form of POST /affiliates, updates, rebates, reads ---------


def create_code(api, n: int, code: str, **fields):
    body = {"address": evm(n), "identifier_type": "evm_address", "name": code, "code": code, **fields}
    return api.post("/affiliates", json=body)


def info(api, n: int) -> dict:
    response = api.get(f"/affiliates/{evm(n)}", params={"identifier_type": "evm_address"})
    assert response.status_code == 200, response.text
    return response.json()


def test_create_affiliate_code_registers_the_affiliate(api, make_api):
    created = create_code(api, A, "Alice_1", signature="0x" + "5" * 130, account_chain_id=8453, user_rebate_rate=0.1)
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["id"], body["name"], body["code"], body["user_identifier"], body["user_identifier_type"]) == (
        f"evm_address:{evm(A)}", "Alice_1", "ALICE_1", evm(A), "evm_address")  # fmt: skip
    assert (body["region"], body["rebate_rate"]) == ("", 0.1) and body["updated_at"].endswith("Z")
    assert error_of(register(api, A), 409)  # registered by it (API.md §4's registration says so)
    assert error_of(create_code(api, A, "another"), 409) == "Address in use"  # one affiliate code per user
    assert error_of(create_code(api, B, "alice_1"), 409) == "Code in use"  # case-insensitive
    generated = create(api, owner=user(C), quantity=1)[0]["code"]
    assert error_of(create_code(api, B, generated.lower()), 409) == "Code in use"  # one namespace with referral codes
    record = api.get("/referral_codes/alice_1").json()  # usable everywhere a referral code is
    assert (record["code"], record["max_uses"], record["available"], record["rebate_rate"]) == (
        "ALICE_1",
        None,
        True,
        0.1,
    )
    assert (record["clicks"], record["total_users"], record["total_earnings"]) == (0, 0, 0)
    assert api.patch("/referral_codes/ALICE_1/use", json=user(D)).status_code == 200
    assert api.get("/referral_codes/status", params=user(D)).json()["code"] == "ALICE_1"
    assert error_of(create_code(make_api(), E, "standard"), 403)  # a write: service_role


def test_the_two_forms_of_post_affiliates_are_told_apart_by_their_fields(api):
    # API.md §4's form is unchanged: a body naming user_identifier is a registration, whatever else it holds.
    assert error_of(register(api, A, code="x"), 400) == "property code should not exist"
    assert error_of(api.post("/affiliates", json={}), 400) == [
        "user_identifier is required",
        "user_identifier_type is required",
    ]
    # The client's: every problem in a message array (the client's ValidationError), even one.
    assert error_of(create_code(api, A, "ab"), 400) == ["code must be 3 to 32 characters of A-Z, a-z, 0-9, _ and -"]
    for bad in ("a b c", "x" * 33, "ſab", "abc\n"):
        assert isinstance(error_of(create_code(api, A, bad), 400), list)
    for rate in (1.5, -0.1, "x", "0.1e1", True):
        [message] = error_of(create_code(api, A, "rated", user_rebate_rate=rate), 400)
        assert message.startswith("user_rebate_rate must be a number from 0 to 1"), message
    assert error_of(api.post("/affiliates", json={"code": "nobody"}), 400) == [
        "address is required", "identifier_type is required"]  # fmt: skip
    assert error_of(create_code(api, A, "okay", identifier_type="fax"), 400)[0].startswith(
        "identifier_type must be one of"
    )
    bad_address = {"address": "0x12", "identifier_type": "evm_address", "code": "okay"}
    assert error_of(api.post("/affiliates", json=bad_address), 400) == ["address is not a valid evm_address"]
    assert api.get("/referral_codes/okay").status_code == 404  # nothing was made
    assert api.get(f"/affiliates/{evm(A)}", params={"identifier_type": "evm_address"}).status_code == 404


def test_code_free_and_available(api, make_api):
    reader = make_api()  # any key of the project
    assert create_code(api, A, "taken").status_code == 201
    [generated] = create(api, owner=user(B), quantity=1, max_uses=1)
    free = {
        text: reader.get(f"/affiliates/codes/{text}").json()
        for text in ("taken", "TAKEN", "new_one", "ab", generated["code"])
    }
    assert free == {
        "taken": {"free": False}, "TAKEN": {"free": False}, "new_one": {"free": True}, "ab": {"free": False},
        generated["code"]: {"free": False},
    }  # fmt: skip

    def available(text: str) -> bool:
        response = reader.get(f"/affiliates/codes/{text}/availability")
        assert response.status_code == 200, response.text
        return response.json()["available"]

    assert available("taken") and available(generated["code"].lower()) and not available("nothing")
    assert api.patch(f"/referral_codes/{generated['code']}/use", json=user(C)).status_code == 200
    assert not available(generated["code"])  # its max_uses reached
    assert api.patch("/referral_codes/taken", json={"max_uses": 0}).status_code == 200  # disabled
    assert not available("taken")


def test_affiliate_info_codes_and_figures(api, make_api):
    api.put("/projects/config", json=CONFIG)
    reader = make_api()
    assert reader.get(f"/affiliates/{evm(A)}", params={"identifier_type": "evm_address"}).status_code == 404
    assert create_code(api, A, "alice").status_code == 201
    [generated] = create(api, owner=user(A), quantity=1)  # newer: listed after
    assert api.patch("/referral_codes/alice/use", json=user(B)).status_code == 200
    assert api.post("/events/batch", json={"events": [purchase("p", B, "100")]}).json() == {"ingested_events": 1}
    api.wait_processed("p")

    def figured() -> dict:
        body = info(reader, A)
        # 50 referral reward + 10 commission (r1 0.1 of 100) through ALICE; B counted once
        assert [(c["code"], c["uses"], c["total_users"], c["total_earnings"]) for c in body["codes"]] == [
            ("ALICE", 1, 1, 60), (generated["code"], 0, 0, 0)]  # fmt: skip
        return body

    body = eventually(figured)
    assert (body["id"], body["name"], body["user_identifier"], body["user_identifier_type"], body["region"]) == (
        f"evm_address:{evm(A)}", "alice", evm(A), "evm_address", "")  # fmt: skip
    assert body["current_tier"] == {"id": "base", "name": "Base", "slug": "base", "rank": 1}
    first = body["codes"][0]
    assert (first["clicks"], first["rebate_rate"], first["created_at"].endswith("Z")) == (0, None, True)
    assert body["updated_at"] >= first["created_at"]
    assert error_of(reader.get(f"/affiliates/{evm(A)}", params={"identifier_type": "fax"}), 400)
    assert error_of(reader.get(f"/affiliates/{evm(C)}", params={"identifier_type": "evm_address"}), 404)
    assert register(api, C).status_code == 201  # an affiliate of API.md §4 without codes
    assert info(reader, C)["codes"] == [] and info(reader, C)["name"] == ""


def test_update_affiliate_code_renames_it_keeping_its_figures(api):
    api.put("/projects/config", json=CONFIG)
    assert create_code(api, A, "before").status_code == 201
    assert api.patch("/referral_codes/before/use", json=user(B)).status_code == 200
    update = {"code": "After", "user_identifier": evm(A), "identifier_type": "evm_address", "signature": "0xsig"}
    renamed = api.post(f"/affiliates/{evm(A)}", json=update)
    assert renamed.status_code == 200, renamed.text
    assert (renamed.json()["code"], renamed.json()["id"]) == ("AFTER", f"evm_address:{evm(A)}")
    assert api.post("/events/batch", json={"events": [purchase("p", B, "100")]}).json() == {"ingested_events": 1}
    api.wait_processed("p")

    def kept() -> None:  # the referral before the rename and the purchase after it: the same code's
        [code] = info(api, A)["codes"]
        assert (code["code"], code["uses"], code["total_users"], code["total_earnings"]) == ("AFTER", 1, 1, 60)

    eventually(kept)
    assert api.get("/referral_codes/before").json()["code"] == "AFTER"  # the former name finds it, and stays its own
    assert api.get("/affiliates/codes/before").json() == {"free": False}
    assert error_of(create_code(api, C, "before"), 409) == "Code in use"
    assert create_code(api, C, "carol").status_code == 201
    assert error_of(api.post(f"/affiliates/{evm(A)}", json={**update, "code": "CAROL"}), 409) == "Code in use"
    assert error_of(api.post(f"/affiliates/{evm(D)}", json={**update, "code": "dave"}), 404)  # no affiliate code
    assert error_of(api.post(f"/affiliates/{evm(A)}", json={**update, "code": "a"}), 400) == [
        "code must be 3 to 32 characters of A-Z, a-z, 0-9, _ and -"]  # fmt: skip
    assert error_of(api.post(f"/affiliates/{evm(A)}", json={"code": "fine"}), 400) == ["identifier_type is required"]


def test_rebate_rate_splits_the_level_1_commission(api):
    api.put("/projects/config", json=CONFIG)
    assert create_code(api, A, "rebate").status_code == 201
    body = {"identifier_type": "evm_address", "code": "REBATE", "signature": "0xsig", "rebate_rate": 0.25}
    changed = api.post(f"/affiliates/{evm(A)}/rebate-rate", json=body)
    assert changed.status_code == 200 and changed.json() == {"code": "REBATE", "rebate_rate": 0.25}
    assert api.patch("/referral_codes/rebate/use", json=user(B)).status_code == 200
    assert api.post("/events/batch", json={"events": [purchase("p", B, "100")]}).json() == {"ingested_events": 1}
    api.wait_processed("p")
    # r1 0.1 of 100 is 10: 7.5 to A (its commission), 2.5 to B (its rebate); referral rewards 50 and 10
    a, b = totals(api, A), totals(api, B)
    assert (a["by_kind"]["affiliate_commission"], a["by_kind"]["rebate"], a["total_points"]) == ("7.5", "0", "57.5")
    assert (b["by_kind"]["rebate"], b["by_kind"]["end_user_reward"], b["total_points"]) == ("2.5", "10", "22.5")
    users_board = api.get("/payouts/leaderboard/users", params={**user(B)}).json()["results"]
    assert [(r["total_amount"], r["total_attributions"]) for r in users_board] == [("22.5", 3)]  # earned as a user
    assert api.get("/payouts/leaderboard/payouts", params=user(A)).json()["results"][0]["total_amount"] == 57.5
    eventually(lambda: _earned(api, A, 57.5))  # the code's earnings: what A kept
    for wrong in (2, -1, "x", None):
        assert isinstance(
            error_of(api.post(f"/affiliates/{evm(A)}/rebate-rate", json={**body, "rebate_rate": wrong}), 400), list
        )
    assert error_of(api.post(f"/affiliates/{evm(B)}/rebate-rate", json=body), 404)  # not B's code
    assert api.get("/referral_codes/rebate").json()["rebate_rate"] == 0.25


def test_a_codes_earnings_are_an_exact_json_number(api):
    """The client declares `total_earnings` a number: written digit for digit, never the nearest float."""
    api.put("/projects/config", json=CONFIG)
    assert create_code(api, A, "exact").status_code == 201
    assert api.patch("/referral_codes/exact/use", json=user(B)).status_code == 200
    sent = api.post("/events/batch", json={"events": [purchase("p", B, "1234567890123.123456789")]})
    assert sent.json() == {"ingested_events": 1}
    api.wait_processed("p")
    # r1 0.1 of the purchase, and the referral reward of 50
    expected = Decimal("123456789062.3123456789")
    assert float(expected) != expected  # a float could not carry it

    def exact() -> None:
        answer = api.get(f"/affiliates/{evm(A)}", params={"identifier_type": "evm_address"})
        [code] = json.loads(answer.text, parse_float=Decimal)["codes"]
        assert code["total_earnings"] == expected

    eventually(exact)
    listed = api.get("/referral_codes", params=user(A))
    [code] = json.loads(listed.text, parse_float=Decimal)["results"]
    assert code["total_earnings"] == expected


def _earned(api, n: int, expected) -> None:
    assert [c["total_earnings"] for c in info(api, n)["codes"]] == [expected]


# -- a code never shadows a route (issue 26.2) --------------------------------------------------------------------


def code_routes_fixed_segments(paths) -> set[str]:
    """Every fixed path segment served where a code stands in another path under the same prefix (any method)."""
    split = [path.strip("/").split("/") for path in paths]
    fixed = set()
    for segments in split:
        for at, segment in enumerate(segments):
            if segment == "{code}":
                prefix = segments[:at]
                fixed |= {other[at] for other in split if other[:at] == prefix and len(other) > at}
    return {segment.upper() for segment in fixed if not segment.startswith("{")}


def test_reserved_codes_are_every_fixed_segment_beside_a_code():
    from rewards.domain.codes import RESERVED_CODES
    from rewards.settings import Settings
    from runtime.serve import embedded_app

    paths = [path.removeprefix("/api/v1") for path in embedded_app(Settings()).openapi()["paths"]]
    assert code_routes_fixed_segments(paths) == RESERVED_CODES == {"STATUS"}


@pytest.mark.parametrize("spelling", ["status", "STATUS", "Status"])
def test_a_code_named_like_a_route_is_refused(api, spelling):
    assert error_of(create_code(api, A, spelling), 400) == [
        f"code {spelling} is reserved: a path of the API has that name"
    ]
    assert api.get(f"/affiliates/codes/{spelling}").json() == {"free": False}
    assert create_code(api, A, "mine").status_code == 201
    renamed = api.post(
        f"/affiliates/{evm(A)}", json={"code": spelling, "user_identifier": evm(A), "identifier_type": "evm_address"}
    )
    assert error_of(renamed, 400) == [f"code {spelling} is reserved: a path of the API has that name"]
    assert [code["code"] for code in info(api, A)["codes"]] == ["MINE"]  # nothing changed
    # what the client's getReferralCode("status") sends still reaches the status endpoint, as the contract has it
    assert error_of(api.get("/referral_codes/status"), 400)
