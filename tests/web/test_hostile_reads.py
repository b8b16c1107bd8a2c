"""Hostile and careless queries of the published client's read endpoints (API.md §7: leaderboards, a user's payouts,
payout terms, the affiliate portal, the console's reads), on both shapes: every text reaches the warehouse as a typed
parameter (quotes, backslashes, NULs, `%`, `_`, non-ASCII and long texts find nothing, or themselves, and break
nothing), and every bound, window, number or enum value out of range is a 400 in the contract's error body, never a
500. One project for the module, with one affiliate, one referral and one conversion whose name is hostile text."""

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.support.harness import Admin, Api

EVM = "evm_address"
ALICE = f"0x{0xA11CE:040x}"
BOB = f"0x{0xB0B:040x}"
HOSTILE = "a'b\\c\"d%e_f\x01é中😀"  # a conversion's name: every text the warehouse reads must match it as it is
CONFIG = {
    "default_tier": "base",
    "tiers": [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0.05", "r3": "0", "r4": "0"}}],
    "conversions": [{"event_name": HOSTILE, "base": {"rate_of": "value", "rate": "1"}, "currency": "point"}],
}
TEXTS = ["'", "\\", "\x00", "%", "_", "' OR '1'='1", "{project:String}", "é中😀", "a" * 5000]
# Window bounds and whether they are one (a day or epoch ms, moved inside the span no stored time is outside of).
DATES = {
    "0001-01-01": True,
    "9999-12-31": True,
    "0": True,
    "-99999999999999999999": False,
    "1e999": False,
    "NaN": False,
    "2026-02-30": False,
    "x": False,
}


def typed(identifier: str) -> dict:
    return {"user_identifier": identifier, "user_identifier_type": EVM}


@contextmanager
def referred_purchase(server) -> Iterator[Api]:
    """A project of its own where Bob, referred by Alice (an affiliate), bought for 5 under the hostile conversion
    name, processed: every read has a figure to find, lose or keep."""
    admin = Admin(server)
    project_id = admin.project()
    with Api(server, admin.key(project_id, "service_role"), project_id) as api:
        assert api.put("/projects/config", json=CONFIG).status_code == 200
        assert api.post("/affiliates", json=typed(ALICE)).status_code == 201
        code = api.post("/referral_codes", json={**typed(ALICE), "quantity": 1}).json()[0]["code"]
        used = api.patch(f"/referral_codes/{code}/use", json=typed(BOB))
        assert used.status_code == 200, used.text
        event = {**typed(BOB), "name": HOSTILE, "dedup_id": "hostile-1",
                 "args": {"value": {"amount": "5", "currency": {"name": "USD"}}}}  # fmt: skip
        assert api.post("/events/batch", json={"events": [event]}).status_code == 200
        api.wait_processed("hostile-1")
        yield api


@pytest.fixture(scope="module")
def api(server):
    with referred_purchase(server) as api:
        yield api


def _answers(api: Api, path: str, params: dict) -> tuple[int, object]:
    response = api.get(path, params=params)
    body = response.json()
    if response.status_code >= 400:  # the contract's error body, never a bare text
        assert set(body) == {"statusCode", "error", "message"} and body["statusCode"] == response.status_code, body
    return response.status_code, body


def _cases() -> list[tuple[str, dict, int]]:
    """(path, params, the status expected) for texts, windows, numbers and enum values at and past their edges."""
    portal = {"user_identifier": ALICE}
    payouts = {"type": "point", "user_identifier": BOB, "identifier_type": EVM}
    referrer = typed(ALICE)
    breakdown = {**portal, "group_by": "day", "date_range": "custom", "from": "2026-01-01", "to": "2026-01-31"}
    cases = []
    for text in TEXTS:
        cases += [
            ("/affiliate-portal/stats", {**portal, "conversion_name": text}, 400 if len(text) > 128 else 200),
            ("/affiliate-portal/stats-breakdown", {**breakdown, "currency_id": text}, 400 if len(text) > 128 else 200),
            ("/affiliate-portal/total-stats", {"audiences[]": text}, 200),
            ("/payouts/leaderboard/volume", {"currency_address": text}, 400 if len(text) > 128 else 200),
            ("/payouts/leaderboard/revenue", {"currency_address": text, "fields": "points"}, 400 if len(text) > 128
             else 200),
            ("/payouts/leaderboard/points", {"user_identifier": text, "identifier_type": "email"}, 400),
            ("/affiliate-portal/referral-tree", {"user_identifier": text}, 400),
            ("/payouts", {**payouts, "user_identifier": text}, 400),
            ("/payouts/by-referrer", {**referrer, "user_identifier_type": text}, 400),
            ("/payouts/terms-by-tier", {"tier_ids": text}, 400),
            ("/payouts/leaderboard/points", {"fields": text}, 400),
            ("/payouts/leaderboard/volume", {"user_type": text}, 400),
            ("/affiliate-portal/stats-breakdown", {**breakdown, "group_by": text}, 400),
        ]  # fmt: skip
    for date, valid in DATES.items():
        status = 200 if valid else 400
        cases += [
            ("/affiliate-portal/stats", {**portal, "from": date}, status),
            ("/affiliate-portal/new-traders", {**portal, "to": date}, status),
            ("/payouts/by-referrer", {**referrer, "from_date": date}, status),
            ("/payouts/movements", {**payouts, "to_date": date}, status),
        ]
    return [
        *cases,
        ("/affiliate-portal/stats", {**portal, "conversion_external_id": str(2**63)}, 200),
        ("/affiliate-portal/stats", {**portal, "conversion_external_id": "9" * 5000}, 400),
        ("/affiliate-portal/stats", {**portal, "conversion_external_id": "-1"}, 400),
        ("/affiliate-portal/stats", {**portal, "conversion_external_id": "1e999"}, 400),
        ("/affiliate-portal/stats", {**portal, "conversion_external_id": "NaN"}, 400),
        ("/affiliate-portal/stats", {**portal, "this_month": "true", "from": "2026-01-01"}, 400),
        ("/affiliate-portal/stats", {**portal, "from": "2026-02-01", "to": "2026-01-01"}, 400),
        ("/affiliate-portal/paid-volumes-by-level", {**portal, "from": "2026-01-01"}, 400),
        ("/affiliate-portal/stats-breakdown", {**breakdown, "from": "0001-01-01", "to": "9999-12-31"}, 400),
        ("/affiliate-portal/stats-breakdown", {**breakdown, "group_by": "week", "from": "0001-01-01"}, 400),
        ("/affiliate-portal/stats-breakdown", {**breakdown, "group_by": "month", "from": "0001-01-01"}, 200),
        ("/affiliate-portal/stats-breakdown", {**breakdown, "date_range": "7d"}, 400),
        ("/affiliate-portal/total-stats", {"statuses[]": "Gone"}, 400),
        ("/affiliate-portal/total-stats", {"regions": "Mars"}, 400),
        ("/payouts", {**payouts, "from": "-99999999999999"}, 400),
        ("/payouts", {**payouts, "from": "0001-01-01", "to": "9999-12-31"}, 200),
        ("/payouts/movements", {**payouts, "page": str(2**31)}, 400),
        ("/payouts/movements", {**payouts, "page": str(2**31 - 1), "page_size": "100"}, 200),
        ("/payouts/leaderboard/points", {"page_size": "101"}, 400),
        ("/payouts/leaderboard/points", {"page": "1.5"}, 400),
        ("/payouts/leaderboard/referred-volume", {"user_identifiers": ",".join([ALICE] * 101)}, 400),
        ("/payouts/leaderboard/referred-volume", {"user_identifiers": ",,,"}, 400),
        ("/console/points", {"hours": "721"}, 400),
        ("/console/claim-checks", {"limit": "0"}, 400),
    ]


def test_hostile_values_find_nothing_or_are_a_400_never_a_500(api):
    wrong = {}
    for path, params, expected in _cases():
        status = _answers(api, path, params)[0]
        if status != expected:
            wrong[f"{path} {params!r:.120}"] = (status, expected)
    assert wrong == {}


def test_a_hostile_conversion_name_is_matched_as_it_is(api):
    portal = {"user_identifier": ALICE}
    assert _answers(api, "/affiliate-portal/stats", {**portal, "conversion_name": HOSTILE})[1]["referred_volume"] == 5
    assert _answers(api, "/affiliate-portal/stats", {**portal, "conversion_name": HOSTILE[:-1]})[1][
        "referred_volume"] == 0  # fmt: skip
    payouts = _answers(api, "/payouts", {"type": "point", "user_identifier": ALICE, "identifier_type": EVM})[1]
    assert [(r["conversion_name"], r["total_amount"]) for r in payouts["results"]] == [(HOSTILE, "0.5")]
