"""Issue 28, item 5: no volume or revenue figure adds two currencies (docs/api.md §4 and §6 `volume_currency`), on
both shapes.

Alice refers Bob. Bob buys for 200 USD, 50 EUR, 7 (no currency named) and 30 USDT (a token named by identifier),
and swaps with 100 USD of revenue; purchases pay points, swaps USDC. The listing's volumes are in points: every
purchase's base (287), none of the swap's (30 USDC). §7's figures are in the volume currency, USD by default: 207 of
volume (200 USD and the 7 that names none), 100 of revenue; `currency_address` still ranks USDT alone. A second
project counts in EUR: 57."""

import json
from decimal import Decimal

import pytest

from rewards.domain.figure_currency import counted, in_currency
from rewards.domain.payout_config import InvalidConfig, VolumeCurrency, config_from_document
from tests.conftest import event, evm
from tests.query_api.test_leaderboards import refer
from tests.support.harness import Admin, Api, eventually
from tests.web.test_auth import error_of

ALICE, BOB = evm(1), evm(2)
USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
USDT = "0xdac17f958d2ee523a2206206994597c13d831ec7"
CONFIG = {
    "default_tier": "base",
    "tiers": [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0", "r3": "0", "r4": "0"}}],
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point"},
        {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"},
         "currency": {"address": USDC, "chain_id": 1, "name": "USDC", "decimals": 6}},
    ],
}  # fmt: skip
EVENTS = [
    event("usd", user=BOB, args={"value": {"amount": "200", "currency": {"name": "USD"}}}),
    event("eur", user=BOB, args={"value": {"amount": "50", "currency": {"name": "eur"}}}),
    event("none", user=BOB, args={"value": {"amount": "7"}}),
    event("usdt", user=BOB, args={"value": {"amount": "30", "currency": {"identifier": USDT, "chain_identifier": 1}}}),
    event("swap", user=BOB, name="swap", args={"revenue": {"amount": "100", "currency": {"name": "USD"}}}),
]


def exact(response) -> dict:
    assert response.status_code == 200, response.text
    return json.loads(response.text, parse_float=Decimal)


def program(server, config: dict) -> Api:
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=config).status_code == 200
    refer(api, ALICE, BOB)
    registered = api.post("/affiliates", json={"user_identifier": ALICE, "user_identifier_type": "evm_address"})
    assert registered.status_code == 201, registered.text
    assert api.post("/events/batch", json={"events": EVENTS}).json() == {"ingested_events": len(EVENTS)}
    api.wait_processed(*(e["dedup_id"] for e in EVENTS))
    return api


@pytest.fixture(scope="module")
def shop(server):
    api = program(server, CONFIG)
    yield api
    api.close()


@pytest.fixture(scope="module")
def euro_shop(server):
    api = program(server, {**CONFIG, "volume_currency": {"name": "EUR"}})
    yield api
    api.close()


def listing_row(api: Api) -> dict:
    [row] = exact(api.get("/affiliates"))["results"]
    assert row["total_volume"] != "0", row  # the views have the volumes
    return row


def portal_stats(api: Api) -> dict:
    return exact(api.get("/affiliate-portal/stats", params={"user_identifier": ALICE}))


def test_the_listing_counts_bases_in_points_only(shop):
    row = eventually(lambda: listing_row(shop))
    assert (row["total_volume"], row["r1_volume"]) == ("287", "287")  # 200 + 50 + 7 + 30; not the swap's 30 USDC
    assert row["total_earnings"] == "28.7"


def test_the_portal_counts_the_volume_currency_and_amounts_naming_none(shop):
    stats = eventually(lambda: _settled(portal_stats(shop)))
    assert (stats["referred_volume"], stats["referred_revenue"], stats["total_volume"]) == (207, 100, 207)
    tree = exact(shop.get("/affiliate-portal/referral-tree", params={"user_identifier": ALICE}))
    [bob] = tree["children"]
    assert (bob["user_identifier"], bob["total_volume"], bob["total_revenue"]) == (BOB, 207, 100)
    daily = {"user_identifier": ALICE, "group_by": "day"}
    breakdown = exact(shop.get("/affiliate-portal/stats-breakdown", params=daily))
    [day] = [row for row in breakdown["results"] if row["r1_volume"]]
    assert (day["r1_volume"], day["revenue"]) == (207, 100)


def _settled(stats: dict) -> dict:
    assert stats["referred_attributions"] == len(EVENTS), stats
    return stats


def test_leaderboards_count_the_volume_currency_unless_asked_for_another(shop):
    own = exact(shop.get("/payouts/leaderboard/volume", params={"user_type": "end_user"}))
    assert [(r["address"], r["total_amount"]) for r in own["results"]] == [(BOB, "207")]
    referred = exact(shop.get("/payouts/leaderboard/referred-volume", params={"user_identifiers": ALICE}))
    assert referred["referred_volumes"] == [{"user_identifier": ALICE, "referred_volume": 207}]
    revenue = exact(shop.get("/payouts/leaderboard/revenue", params={"user_type": "end_user"}))
    assert [(r["address"], r["total_amount"]) for r in revenue["results"]] == [(BOB, "100")]
    usdt = exact(shop.get("/payouts/leaderboard/volume", params={"user_type": "end_user", "currency_address": USDT}))
    assert [(r["address"], r["total_amount"]) for r in usdt["results"]] == [(BOB, "30")]


def test_another_volume_currency_counts_its_own(euro_shop):
    stats = eventually(lambda: _settled(portal_stats(euro_shop)))
    assert (stats["referred_volume"], stats["referred_revenue"]) == (57, 0)  # 50 EUR and the 7 naming none
    assert exact(euro_shop.get("/projects/config"))["volume_currency"] == {"name": "EUR"}
    row = eventually(lambda: listing_row(euro_shop))
    assert row["total_volume"] == "287"  # points, whatever the volume currency


def test_the_volume_currency_cannot_change_once_conversions_are_counted(shop, server):
    changed = shop.put("/projects/config", json={**CONFIG, "volume_currency": {"identifier": USDT}})
    assert error_of(changed, 409).startswith("volume_currency cannot change once the project has conversions")
    assert exact(shop.get("/projects/config"))["volume_currency"] == {"name": "USD"}
    assert shop.put("/projects/config", json={**CONFIG, "volume_currency": {"name": "USD"}}).status_code == 200
    fresh = Admin(server)
    project = fresh.project()
    with Api(server, fresh.key(project, "service_role"), project) as api:
        done = api.put("/projects/config", json={**CONFIG, "volume_currency": {"identifier": USDT}})
        assert done.status_code == 200 and done.json()["volume_currency"] == {"identifier": USDT}


@pytest.mark.parametrize(
    "document, problem",
    [
        ({"name": "USD", "identifier": USDT}, "exactly one of name or identifier"),
        ({}, "exactly one of name or identifier"),
        ({"name": ""}, "at least 1 character"),
        ({"name": "x" * 65}, "at most 64 characters"),
        ({"identifier": "x" * 129}, "at most 128 characters"),
        ({"name": "USD", "chain": 1}, "Extra inputs are not permitted"),
        ("USD", "valid dictionary"),
    ],
)
def test_a_volume_currency_is_one_name_or_one_identifier(document, problem):
    with pytest.raises(InvalidConfig) as raised:
        config_from_document({"default_tier": None, "tiers": [], "volume_currency": document})
    assert problem in str(raised.value.errors), raised.value.errors


USD, TOKEN = VolumeCurrency(name="usd"), VolumeCurrency(identifier=USDT.upper())


@pytest.mark.parametrize(
    "arg, in_usd, in_token",
    [
        ({"amount": "1.5", "currency": {"name": "USD"}}, "1.5", "0"),
        ({"amount": "1.5", "currency": "Usd"}, "1.5", "0"),  # a bare text is a name
        ({"amount": "1.5"}, "1.5", "1.5"),  # no currency: counted in any
        ({"amount": "1.5", "currency": None}, "1.5", "1.5"),
        ({"amount": "1.5", "currency": {"chain_identifier": 1}}, "1.5", "1.5"),  # names none
        ({"amount": "1.5", "currency": ""}, "1.5", "1.5"),
        ({"amount": "1.5", "currency": {"name": "EUR"}}, "0", "0"),
        ({"amount": "1.5", "currency": {"identifier": USDT}}, "0", "1.5"),
        ({"amount": "1.5", "currency": {"identifier": USDT, "name": "USD"}}, "1.5", "1.5"),
        ({"amount": "1.5", "currency": 5}, "0", "0"),  # not a currency: counted in none
        ({"amount": "1.5", "currency": ["USD"]}, "0", "0"),
        ({"amount": 3, "currency": {"name": "usd"}}, "3", "0"),  # a bare JSON number
        ({"amount": "1e5", "currency": {"name": "usd"}}, "0", "0"),  # not a plain decimal: nothing to count
        ({"amount": "1" + "0" * 30}, "0", "0"),  # beyond the limits
        ({"currency": {"name": "usd"}}, "0", "0"),  # no amount
        ("1.5", "0", "0"),
        (None, "0", "0"),
    ],
)
def test_which_amounts_count(arg, in_usd, in_token):
    assert (counted(arg, USD), counted(arg, TOKEN)) == (Decimal(in_usd), Decimal(in_token))


def test_a_name_and_an_identifier_are_compared_apart():
    assert in_currency({"identifier": "usd"}, USD) is False  # an identifier is not a name
    assert in_currency({"name": USDT}, TOKEN) is False
