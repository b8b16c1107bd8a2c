"""API.md §7's leaderboards (docs/fuul-sdk-7.41.0-surface.md G5) and §1's, as the published client asks for them, on
both shapes: GET /payouts/leaderboard/{points,volume,revenue,referred-volume,payouts,users} and /leaderboard/referred.

One project per shape (module-scoped) where every figure is known in advance: A refers B and C, B refers D and F (F's
referral is then removed), E is referred by nobody. Purchases pay points (with a value too large for a float), swaps
pay USDC; the expected figures are computed here from what the events paid. Volumes and revenues count USD, the
project's volume currency (C's buy in USDT and E's swap in USDC rank only under their `currency_address`). Answers
are read with exact decimals (`parse_float=Decimal`): a number that lost digits on the way fails."""

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from rewards.domain.amounts import exact_sum, multiply, to_points
from tests.conftest import event, evm
from tests.ingest_api.test_referral_codes import user
from tests.support.harness import Admin, Api, eventually
from tests.web.test_auth import error_of

A, B, C, D, E, F = (evm(n) for n in range(1, 7))
USDC = "0xA0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"  # checksummed here; the config and the filter take any case
USDT = "0xdac17f958d2ee523a2206206994597c13d831ec7"
CONFIG = {
    "default_tier": "base",
    "tiers": [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0.05", "r3": "0", "r4": "0"}}],
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
         "end_user_reward": {"fixed": "10"}},
        {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"},
         "currency": {"address": USDC.lower(), "chain_id": 1, "name": "USDC", "decimals": 6},
         "end_user_reward": {"rate": "0.5"}},
    ],
    "referral_reward": {"referrer": "50", "referred": "10"},
}  # fmt: skip

BIG = Decimal("123456789012345678901.123456789012345678")  # D's purchase: 39 significant digits
P1, P2 = to_points(multiply(BIG, Decimal("0.1"))), to_points(multiply(BIG, Decimal("0.05")))  # B's r1, A's r2 on it


def plus(*values) -> Decimal:
    """An exact sum (Decimal's `+` rounds to 28 digits)."""
    return exact_sum(Decimal(value) for value in values)


def usd(amount: str) -> dict:
    return {"amount": amount, "currency": {"name": "USD"}}


def token(amount: str, address: str, chain: int) -> dict:
    return {
        "amount": amount,
        "currency": {"identifier": address, "identifier_type": "evm_address", "chain_identifier": chain},
    }


EVENTS = [
    event("b-buy", user=B, args={"value": usd("100")}),
    event("c-buy", user=C, args={"value": token("100", USDT, 10)}),
    event("d-buy", user=D, args={"value": usd(str(BIG))}),
    event("e-swap", user=E, name="swap", args={"revenue": token("100", USDC, 1)}),
    event("c-swap", user=C, name="swap", args={"revenue": usd("40")}),
]


def refer(api: Api, referrer: str, referred: str) -> str:
    created = api.post("/referral_codes", json={"user_identifier": referrer, "user_identifier_type": "evm_address",
                                                 "quantity": 1})  # fmt: skip
    assert created.status_code == 201, created.text
    code = created.json()[0]["code"]
    used = api.patch(
        f"/referral_codes/{code}/use", json={"user_identifier": referred, "user_identifier_type": "evm_address"}
    )
    assert used.status_code == 200, used.text
    return code


def exact(response) -> dict:
    """The answer with its numbers as exact decimals (integers stay int)."""
    assert response.status_code == 200, response.text
    return json.loads(response.text, parse_float=Decimal)


def ranks(body: dict, *fields: str) -> list[tuple]:
    return [(row["rank"], row["address"], *(row[f] for f in fields)) for row in body["results"]]


@pytest.fixture(scope="module")
def shop(server):
    """The project of the module's scenario on one shape: a service_role client (`.standard`: a key without scope)."""
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    api.standard = Api(server, admin.key(project), project)
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    api.codes = {
        (referrer, referred): refer(api, referrer, referred) for referrer, referred in ((A, B), (A, C), (B, D))
    }
    code = refer(api, B, F)
    removal = {**user(6), "referrer_identifier": B, "referrer_identifier_type": "evm_address"}
    assert api.request("DELETE", f"/referral_codes/{code}/referrals", params=removal, json={}).status_code == 200
    assert api.post("/events/batch", json={"events": EVENTS}).json() == {"ingested_events": len(EVENTS)}
    api.wait_processed(*(e["dedup_id"] for e in EVENTS))
    # Code uses and their removal are written by the workers too: wait until every referral is counted.
    eventually(lambda: ranks(exact(api.get("/leaderboard/referred")), "total_referred_users") == [(1, A, 2), (2, B, 1)])
    yield api
    api.standard.close()
    api.close()


def test_points_rank_every_point_earned_ties_share_a_rank(shop):
    body = exact(shop.standard.get("/payouts/leaderboard/points"))
    # B: referral rewards 50 + 50 (F's stays after the removal) + 10 referred + 10 purchase reward + r1 of D's buy;
    # A: 50 + 50 + r1 of B's and C's buys (10 + 10) + r2 of D's; C, D: 10 referred + 10 reward; F: 10 referred.
    assert ranks(body, "total_amount") == [
        (1, B, plus(120, P1)), (2, A, plus(120, P2)), (3, C, 20), (3, D, 20), (5, F, 10)
    ]  # fmt: skip
    # conversions with a payout to the user: B its buy and D's (as r1); A B's, C's and D's buys and C's swap
    assert [row["total_attributions"] for row in body["results"]] == [2, 4, 2, 1, 0]
    assert (body["total_results"], body["page"], body["page_size"]) == (5, 1, 25)
    assert body["results"][0]["user_identifier_type"] == "evm_address"
    calculated = datetime.fromisoformat(body["calculated_at"].replace("Z", "+00:00"))
    assert body["calculated_at"].endswith("Z") and abs(datetime.now(UTC) - calculated) < timedelta(minutes=5)


def test_points_pages_filters_and_optional_fields(shop):
    page2 = exact(shop.get("/payouts/leaderboard/points", params={"page": 2, "page_size": 2}))
    assert ranks(page2) == [(3, C), (3, D)] and page2["total_results"] == 5
    assert ranks(exact(shop.get("/payouts/leaderboard/points", params={"page": 4, "page_size": 2}))) == []
    only = {"user_identifier": D, "user_identifier_type": "evm_address"}
    assert ranks(exact(shop.get("/payouts/leaderboard/points", params=only)), "total_amount") == [(3, D, 20)]
    deprecated = exact(shop.get("/payouts/leaderboard/points", params={"user_address": F.upper().replace("0X", "0x")}))
    assert ranks(deprecated) == [(5, F)]
    fields = "affiliate_code,tiers,referred_volume,referred_users,enduser_volume,enduser_revenue"
    [a] = exact(shop.get("/payouts/leaderboard/points", params={"user_identifier": A, "identifier_type": "evm_address",
                                                                  "fields": fields}))["results"]  # fmt: skip
    assert (a["affiliate_code"], a["tiers"]) == (shop.codes[A, B], {"base": "Base"})  # A's oldest code
    # B's buy (L1) and D's (L2), in USD, the volume currency; not C's, in USDT (docs/api.md §6)
    assert (a["referred_volume"], a["referred_users"]) == (plus(100, BIG), 2)
    assert (a["enduser_volume"], a["enduser_revenue"]) == (0, 0)
    [c] = exact(shop.get("/payouts/leaderboard/points", params={**user(3), "fields": "enduser_revenue"}))["results"]
    assert c["enduser_revenue"] == 40 and "tiers" not in c and "affiliate_code" not in c


def test_volume_counts_own_and_referred_events_by_user_type(shop):
    own = exact(shop.get("/payouts/leaderboard/volume", params={"user_type": "end_user"}))
    assert ranks(own, "total_amount") == [(1, D, str(BIG)), (2, B, "100")]  # C's buy is in USDT
    assert own["results"][0]["chain_id"] is None and own["results"][0]["affiliate_code"] is None  # D owns no code
    referred = exact(shop.get("/payouts/leaderboard/volume", params={"user_type": "affiliate"}))
    assert ranks(referred, "total_amount") == [(1, A, str(plus(100, BIG))), (2, B, str(BIG))]
    assert referred["results"][1]["affiliate_code"] == shop.codes[B, D]  # B's oldest code
    both = exact(shop.get("/payouts/leaderboard/volume"))
    assert ranks(both, "total_amount") == [
        (1, A, str(plus(100, BIG))), (1, B, str(plus(100, BIG))), (3, D, str(BIG))
    ]  # fmt: skip
    # Only the value named in USDT (C's buy): C's own, and A's as C's referrer; the chain the events name.
    usdt = exact(shop.get("/payouts/leaderboard/volume", params={"currency_address": USDT.upper().replace("0X", "0x")}))
    assert ranks(usdt, "total_amount", "chain_id") == [(1, A, "100", "10"), (1, C, "100", "10")]
    mine = exact(
        shop.get("/payouts/leaderboard/volume", params={"user_identifier": D, "identifier_type": "evm_address"})
    )
    assert ranks(mine, "total_amount") == [(3, D, str(BIG))] and mine["total_results"] == 3
    nothing = {"user_identifier": C, "identifier_type": "evm_address"}  # no volume in USD: no row
    assert ranks(exact(shop.get("/payouts/leaderboard/volume", params=nothing))) == []


def test_revenue_ranks_with_ties_and_optional_fields(shop):
    both = exact(shop.get("/payouts/leaderboard/revenue"))
    assert ranks(both, "total_amount") == [(1, A, "40"), (1, C, "40")]  # E's revenue is in USDC
    assert all(set(row) >= {"affiliate_code", "user_identifier"} and "points" not in row for row in both["results"])
    fields = {"user_type": "end_user", "fields": "attributions,volume_usd,points"}
    own = exact(shop.get("/payouts/leaderboard/revenue", params=fields))
    assert ranks(own, "total_amount", "attributions", "volume_usd", "points") == [
        (1, C, "40", 2, 0, 20)
    ]  # fmt: skip
    as_referrer = exact(shop.get("/payouts/leaderboard/revenue", params={**fields, "user_type": "affiliate"}))
    assert ranks(as_referrer, "total_amount", "attributions", "volume_usd", "points") == [
        (1, A, "40", 4, plus(100, BIG), plus(120, P2))
    ]  # fmt: skip
    in_usdc = exact(shop.get("/payouts/leaderboard/revenue", params={"currency_address": USDC}))
    assert ranks(in_usdc, "total_amount") == [(1, E, "100")]


def test_referred_users_and_referred_volume(shop):
    body = exact(shop.standard.get("/leaderboard/referred", params={"page_size": 1, "page": 2}))
    assert ranks(body, "total_referred_users") == [(2, B, 1)] and body["total_results"] == 2  # F removed
    assert body["calculated_at"].endswith("Z")
    asked = ",".join([A, B.upper().replace("0X", "0x"), E, A])
    volumes = exact(shop.get("/payouts/leaderboard/referred-volume", params={"user_identifiers": asked}))
    assert volumes == {
        "project_id": shop.project_id,
        "referred_volumes": [
            {"user_identifier": A, "referred_volume": plus(100, BIG)},
            {"user_identifier": B, "referred_volume": BIG},
            {"user_identifier": E, "referred_volume": 0},
        ],
        "total_count": 3,
    }
    by_email = {"user_identifiers": "x@example.com", "identifier_type": "email"}
    assert exact(shop.get("/payouts/leaderboard/referred-volume", params=by_email))["referred_volumes"] == [
        {"user_identifier": "x@example.com", "referred_volume": 0}
    ]


def test_payouts_leaderboard_as_the_client_reads_it(shop):
    body = exact(shop.get("/payouts/leaderboard/payouts"))
    # As affiliates: B 50 + 50 + r1 of D's buy (3 payouts); A 50 + 50 + 10 + 10 + r2 of D's buy (5). A number.
    assert ranks(body, "total_amount", "total_attributions", "chain_id") == [
        (1, B, plus(100, P1), 3, ""),
        (2, A, plus(120, P2), 5, ""),
    ]
    assert body["calculated_at"].endswith("Z") and body["results"][0]["user_identifier"] == B
    end_users = exact(shop.get("/payouts/leaderboard/payouts", params={"user_type": "end_user"}))
    assert ranks(end_users, "total_amount") == [(1, B, 20), (1, C, 20), (1, D, 20), (4, F, 10)]
    usdc = {"currency_address": USDC}
    # USDC in raw units (6 decimals): A's r1 of C's swap base (0.3 × 40); as users, E's and C's halves of theirs.
    assert ranks(exact(shop.get("/payouts/leaderboard/payouts", params=usdc)), "total_amount", "chain_id") == [
        (1, A, 1_200_000, "1")
    ]  # fmt: skip
    users_usdc = exact(shop.get("/payouts/leaderboard/users", params=usdc))
    assert ranks(users_usdc, "total_amount", "chain_id") == [(1, E, "15000000", "1"), (2, C, "6000000", "1")]
    windowed = {**usdc, "from": "2000-01-01T00:00:00Z", "to": datetime.now(UTC).isoformat()}
    assert ranks(exact(shop.get("/payouts/leaderboard/users", params=windowed)), "total_amount") == [
        (1, E, "15000000"), (2, C, "6000000")
    ]  # fmt: skip
    fields = {"user_address": A, "fields": "referred_volume,referred_users,affiliate_code,tiers"}
    [a] = exact(shop.get("/payouts/leaderboard/payouts", params=fields))["results"]
    assert (a["rank"], a["referred_volume"], a["referred_users"], a["tiers"]) == (
        2,
        plus(100, BIG),
        2,
        {"base": "Base"},
    )
    as_affiliates = exact(shop.get("/payouts/leaderboard/users", params={"user_type": "affiliate"}))
    assert ranks(as_affiliates, "total_amount") == [
        (1, B, str(plus(100, P1))),
        (2, A, str(plus(120, P2))),
    ]  # §1: strings


def test_projects_see_only_their_own_figures(shop):
    admin = Admin(shop.server)
    other = admin.project()
    with Api(shop.server, admin.key(other), other) as stranger:
        for path in ("/payouts/leaderboard/points", "/payouts/leaderboard/volume", "/payouts/leaderboard/revenue",
                     "/leaderboard/referred", "/payouts/leaderboard/payouts"):  # fmt: skip
            body = exact(stranger.get(path))
            assert (body["results"], body["total_results"]) == ([], 0), path
        volumes = exact(stranger.get("/payouts/leaderboard/referred-volume", params={"user_identifiers": A}))
        assert volumes["referred_volumes"] == [{"user_identifier": A, "referred_volume": 0}]


@pytest.mark.parametrize(
    ("path", "params", "message"),
    [
        ("/payouts/leaderboard/volume", {"user_type": "everyone"}, "user_type"),
        ("/payouts/leaderboard/payouts", {"user_type": "admin"}, "user_type"),
        ("/payouts/leaderboard/points", {"fields": "tiers,nope"}, "fields"),
        ("/payouts/leaderboard/revenue", {"fields": "tiers"}, "fields"),
        ("/payouts/leaderboard/points", {"page_size": 101}, "page_size"),
        ("/leaderboard/referred", {"page": 0}, "page"),
        ("/payouts/leaderboard/volume", {"user_identifier": A}, "user_identifier_type is required"),
        ("/payouts/leaderboard/revenue", {"user_identifier": "nope", "identifier_type": "evm_address"}, "evm_address"),
        ("/payouts/leaderboard/volume", {"currency_address": "x" * 129}, "currency_address"),
        ("/payouts/leaderboard/referred-volume", {}, "user_identifiers is required"),
        ("/payouts/leaderboard/referred-volume", {"user_identifiers": ",".join(evm(n) for n in range(101))},
         "at most 100"),
        ("/payouts/leaderboard/referred-volume", {"user_identifiers": f"{A},nope"}, "user_identifiers[1]"),
        ("/payouts/leaderboard/referred-volume", {"user_identifiers": A, "identifier_type": "fax"}, "identifier_type"),
    ],
)  # fmt: skip
def test_bad_parameters_are_400(shop, path, params, message):
    assert message in str(error_of(shop.get(path, params=params), 400))
