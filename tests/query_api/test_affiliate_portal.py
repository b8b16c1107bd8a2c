"""API.md §7, the affiliate portal (GET /affiliate-portal/...): an affiliate's figures from what its referral chain's
events paid, in windows and by conversion, the referral tree, the breakdown, new traders, payout-eligible figures by
level, and the project's totals with the client's filters; every figure a JSON number written exactly.

One scenario per shape (module-scoped): A refers B, F and G (G's referral removed since), B refers C, C refers D,
D refers E, E refers H (five levels below A). A, B and D are affiliates (D's tier pays nothing at level 4)."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from query_api.affiliate_portal import service
from query_api.affiliate_portal.figures import Scope
from rewards.domain.payout_config import external_id
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from schemas.clickhouse.values import PARAM_BYTES, param_text
from tests.conftest import SERVICE, evm
from tests.ingest_api.test_referral_codes import create, user
from tests.support.harness import Admin, Api, eventually
from tests.web.test_auth import error_of

A, B, C, D, E, F, G, H = 1, 2, 3, 4, 5, 6, 7, 8
OLD_MS = now_ms() - 40 * 86_400_000  # C's purchase: outside any window of this month or the last 30 days
USDC = {"address": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "chain_id": 1, "name": "USDC", "decimals": 6}
RATES = {"r1": "0.1", "r2": "0.05", "r3": "0.02", "r4": "0.01"}
CONFIG = {
    "default_tier": "base",
    "tiers": [{"id": "base", "name": "Base", "rank": 1, "rates": RATES},
              {"id": "nothing_at_4", "name": "Three levels", "rank": 2, "rates": {**RATES, "r4": "0"}}],
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
         "end_user_reward": {"fixed": "1"}},
        {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"}, "currency": USDC},
        {"event_name": "signup", "base": {"fixed": "100"}, "currency": "point"},
    ],
    "referral_reward": {"referrer": "50", "referred": "10"},
}  # fmt: skip
AFFILIATES = {
    A: {"name": "Alice", "status": "active", "region": "EU", "audience": "crypto"},
    B: {"name": "Bob", "status": "pending", "region": "US", "audience": "gaming"},
    D: {"name": "Dan", "status": "suspended", "region": "jp", "audience": "crypto", "tier": "nothing_at_4"},
}


def buy(dedup_id: str, buyer: int, name: str = "purchase", value: str | None = None, revenue: str | None = None,
        **extra) -> dict:  # fmt: skip
    args = {key: {"amount": amount, "currency": {"name": "USD"}}
            for key, amount in (("value", value), ("revenue", revenue)) if amount is not None}  # fmt: skip
    return {"name": name, **user(buyer), "dedup_id": dedup_id, "args": args, **extra}


EVENTS = [
    buy("e-buys", E, value="100", revenue="7"),  # A at level 4 (D's tier pays nothing there), B 3, C 2, D 1
    buy("d-buys", D, value="40.5"),  # A at level 3
    buy("c-buys", C, value="10", timestamp=OLD_MS),  # A at level 2, forty days ago
    buy("b-buys", B, value="3"),  # A at level 1
    buy("f-buys", F, value="2.25"),  # A at level 1
    buy("f-swaps", F, name="swap", revenue="100"),  # A at level 1: base 30 USDC, A's 10% = 3 USDC
    buy("f-signs-up", F, name="signup"),  # A at level 1: base 100, no value
    buy("a-buys", A, value="5"),  # A's own: its end-user volume
    buy("h-buys", H, value="1000"),  # five levels below A: not A's
]
# What A earned as an affiliate, in points: commissions (B's 0.3, F's 0.225 and 10, C's 0.5, D's 0.81, E's 0) and three
# referral rewards of 50 (B, F, G used its codes).
A_POINTS = Decimal("161.835")


def refer(api: Api, owner: int, referred: int) -> str:
    code = create(api, owner=user(owner), quantity=1)[0]["code"]
    assert api.patch(f"/referral_codes/{code}/use", json=user(referred)).status_code == 200
    return code


def exact(response) -> dict | list:
    """The answer with its JSON numbers read exactly (Decimal), as the client's declared numbers are written."""
    assert response.status_code == 200, response.text
    return response.json(parse_float=Decimal)


@pytest.fixture(scope="module")
def portal(server) -> Api:
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, SERVICE), project)
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    for n, fields in AFFILIATES.items():
        assert api.post("/affiliates", json={**user(n), **fields}).status_code == 201
    code_of_g = None
    for owner, referred in ((A, B), (A, F), (A, G), (B, C), (C, D), (D, E), (E, H)):
        code = refer(api, owner, referred)
        code_of_g = code if referred == G else code_of_g
    query = {**user(G), "referrer_identifier": evm(A), "referrer_identifier_type": "evm_address"}
    assert api.request("DELETE", f"/referral_codes/{code_of_g}/referrals", params=query, json={}).status_code == 200
    assert api.post("/events/batch", json={"events": EVENTS}).json() == {"ingested_events": len(EVENTS)}
    api.wait_processed(*(e["dedup_id"] for e in EVENTS))
    api.settle()  # the affiliates and referrals too (on the project's own partition)
    yield api
    api.close()


@pytest.fixture(scope="module")
def other(server, portal) -> Api:
    """Another project where A is an affiliate too, with a referral and a purchase of its own."""
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project), project)
    service = Api(server, admin.key(project, SERVICE), project)
    assert service.put("/projects/config", json=CONFIG).status_code == 200
    assert service.post("/affiliates", json={**user(A), "status": "suspended"}).status_code == 201
    refer(service, A, B)
    assert service.post("/events/batch", json={"events": [buy("x", B, value="7")]}).json()["ingested_events"] == 1
    service.wait_processed("x")
    service.close()
    yield api
    api.close()


def stats(api: Api, n: int = A, **params) -> dict:
    return exact(api.get("/affiliate-portal/stats", params={"user_identifier": evm(n), **params}))


def days_ago(days: int) -> str:
    return (datetime.now(UTC).date() - timedelta(days=days)).isoformat()


def test_stats_count_what_each_level_of_the_chain_paid(portal):
    body = eventually(lambda: _settled(stats(portal)))
    assert (body["user_identifier"], body["user_identifier_type"]) == (evm(A), "evm_address")
    volumes = [body[k] for k in ("referred_volume", "r2_volume", "r3_volume", "r4_volume")]
    assert volumes == [Decimal("5.25"), 10, Decimal("40.5"), 100]  # B 3 + F 2.25; C; D; E (paid nothing, still counted)
    assert (body["multilevel_volume"], body["total_volume"]) == (Decimal("150.5"), Decimal("155.75"))
    revenues = [body[k] for k in ("referred_revenue", "r2_revenue", "r3_revenue", "r4_revenue")]
    assert revenues == [100, 0, 0, 7] and body["end_user_volume"] == 5
    assert body["referred_attributions"] == 4  # B's purchase, F's purchase, swap and signup
    assert body["total_earnings"] == [{"amount": Decimal("3"), "currency": "USDC"},
                                      {"amount": A_POINTS, "currency": "point"}]  # fmt: skip
    assert [body[f"r{n}_earnings"] for n in (1, 2, 3, 4)] == [[{"amount": 3, "currency": "USDC"}], [], [], []]
    assert (body["referred_users"], body["active_referrers"]) == (2, 2)  # B and F converted
    assert [body[f"active_referred_users_r{n}"] for n in (2, 3, 4)] == [1, 1, 1]
    assert (body["total_referrers"], body["assigned_referrers"]) == (3, 2)  # G's referral was removed
    assert (body["status"], body["region"]) == ("Active", "EU")
    assert len(body["referral_codes"]) == 3 and all(isinstance(code, str) for code in body["referral_codes"])
    tier = {"id": "base", "name": "Base", "slug": "base", "rank": 1}
    assert body["effective_tier"] == tier and body["current_tier"] == tier
    totals = portal.get(f"/payouts/totals/{evm(A)}", params={"identifier_type": "evm_address"}).json()["by_kind"]
    assert Decimal(totals["affiliate_commission"]) + Decimal(totals["referral_reward"]) == A_POINTS


def _settled(body: dict) -> dict:
    assert body["assigned_referrers"] == 2 and body["r4_volume"] == 100, body
    return body


def test_numbers_are_json_numbers_written_exactly(portal):
    raw = portal.get("/affiliate-portal/stats", params={"user_identifier": evm(A)}).text
    assert '"referred_volume":5.25,' in raw and '"multilevel_volume":150.5,' in raw
    assert '{"amount":161.835,"currency":"point"}' in raw and '"r4_revenue":7,' in raw
    body = portal.get("/affiliate-portal/stats", params={"user_identifier": evm(A)}).json()
    assert all(type(body[k]) in (int, float) for k in ("total_volume", "end_user_volume", "referred_attributions"))


def test_the_affiliate_is_named_by_its_identifier_alone(portal, other):
    upper = "0x" + evm(D)[2:].upper()  # an EVM address in any case is the same address
    body = stats(portal, user_identifier=upper)
    assert (body["user_identifier"], body["status"], body["region"]) == (evm(D), "Flagged", "JP")
    assert body["effective_tier"]["id"] == "nothing_at_4" and body["referred_volume"] == 100
    assert stats(portal, B)["region"] == "Other" and stats(portal, B)["status"] == "Paused"
    error_of(portal.get("/affiliate-portal/stats", params={"user_identifier": evm(C)}), 404)  # not an affiliate
    error_of(portal.get("/affiliate-portal/stats", params={"user_identifier": "not-a-user"}), 400)
    error_of(portal.get("/affiliate-portal/stats"), 400)
    # The other project's A: its own figures only, and B is no affiliate there.
    theirs = eventually(lambda: _with_volume(stats(other), 7))
    assert (theirs["status"], theirs["total_earnings"]) == (
        "Flagged",
        [{"amount": Decimal("50.7"), "currency": "point"}],
    )
    error_of(other.get("/affiliate-portal/stats", params={"user_identifier": evm(B)}), 404)


def _with_volume(body: dict, volume) -> dict:
    assert body["referred_volume"] == volume, body
    return body


def test_windows_and_conversion_filters(portal):
    week = stats(portal, **{"from": days_ago(7), "to": days_ago(0)})
    assert (week["r2_volume"], week["total_volume"]) == (0, Decimal("145.75"))  # without C's purchase of 40 days ago
    assert week["total_earnings"][1] == {"amount": A_POINTS - Decimal("0.5"), "currency": "point"}
    assert (week["total_referrers"], week["active_referred_users_r2"]) == (3, 0)  # all time; in the window
    assert stats(portal, **{"from": days_ago(60), "to": days_ago(30)})["total_volume"] == 10
    assert stats(portal, this_month="false")["total_volume"] == Decimal("155.75")  # "false": not this month
    month = stats(portal, this_month="true")
    assert month["r2_volume"] == 0 and month["r3_volume"] == Decimal("40.5")
    assert stats(portal, **{"from": days_ago(3)})["total_volume"] == Decimal("145.75")  # open to the end
    by_name = stats(portal, conversion_name="purchase")
    assert (by_name["referred_volume"], by_name["referred_revenue"], by_name["referred_attributions"]) == (
        Decimal("5.25"), 0, 2)  # fmt: skip
    assert by_name["end_user_volume"] == 5 and by_name["r4_revenue"] == 7
    assert by_name["total_earnings"] == [{"amount": Decimal("1.835"), "currency": "point"}]  # commissions only
    swap = stats(portal, conversion_external_id=external_id("swap"))  # as GET /conversions numbers it
    assert (swap["referred_volume"], swap["referred_revenue"], swap["end_user_volume"]) == (0, 100, 0)
    assert swap["total_earnings"] == [{"amount": 3, "currency": "USDC"}]
    both = stats(portal, conversion_external_id=external_id("swap"), conversion_name="purchase")
    assert both["total_volume"] == 0 and both["total_earnings"] == []  # a conversion must be both: none is
    assert stats(portal, conversion_external_id=9)["total_earnings"] == []  # no such conversion
    for params in ({"this_month": "true", "from": days_ago(3)}, {"from": days_ago(1), "to": days_ago(2)},
                   {"this_month": "maybe"}, {"conversion_external_id": -1}, {"from": "yesterday"}):  # fmt: skip
        error_of(portal.get("/affiliate-portal/stats", params={"user_identifier": evm(A), **params}), 400)


def test_referral_tree_down_to_level_4(portal):
    tree = eventually(lambda: _tree_settled(exact(portal.get("/affiliate-portal/referral-tree",
                                                                params={"user_identifier": evm(A)}))))  # fmt: skip

    def shape(node: dict) -> tuple:
        return (node["user_identifier"], node["traders"], node["total_volume"], node["total_revenue"],
                [shape(child) for child in node["children"]])  # fmt: skip

    e = (evm(E), 1, 100, 7, [])  # H, at level 5 below A, is not in A's tree
    d = (evm(D), 2, Decimal("140.5"), 7, [e])
    c = (evm(C), 3, Decimal("150.5"), 7, [d])
    b = (evm(B), 4, Decimal("153.5"), 7, [c])
    f = (evm(F), 1, Decimal("2.25"), 100, [])  # G's referral was removed
    assert shape(tree) == (evm(A), 5, Decimal("155.75"), 107, [b, f])
    ids = {node["user_identifier"]: node["project_affiliate_id"] for node in _nodes(tree)}
    assert ids == {evm(A): f"evm_address:{evm(A)}", evm(B): f"evm_address:{evm(B)}", evm(C): None,
                   evm(D): f"evm_address:{evm(D)}", evm(E): None, evm(F): None}  # fmt: skip
    leaf = exact(portal.get("/affiliate-portal/referral-tree", params={"user_identifier": evm(D)}))
    assert (leaf["traders"], leaf["total_volume"], [c["user_identifier"] for c in leaf["children"]]) == (
        2,
        1100,
        [evm(E)],
    )


def _tree_settled(tree: dict) -> dict:
    assert [child["user_identifier"] for child in tree["children"]] == [evm(B), evm(F)], tree
    return tree


def _nodes(node: dict):
    yield node
    for child in node["children"]:
        yield from _nodes(child)


def test_stats_breakdown_by_day_week_and_month(portal):
    def breakdown(**params) -> list[dict]:
        query = {"user_identifier": evm(A), **params}
        return exact(portal.get("/affiliate-portal/stats-breakdown", params=query))["results"]

    days = breakdown(group_by="day", date_range="7d")
    assert [row["date"] for row in days] == [days_ago(n) for n in range(6, -1, -1)]  # every day, zeros too
    today = days[-1]
    assert (today["r1_volume"], today["r2_volume"], today["r3_volume"]) == (Decimal("5.25"), 0, Decimal("40.5"))
    assert (today["revenue"], today["attributions"], today["referred_users"]) == (107, 6, 3)
    assert (today["earnings"], today["earnings_currency"]) == (A_POINTS - Decimal("0.5"), "point")
    assert all(row["attributions"] == 0 and row["earnings"] == 0 for row in days[:-1])
    usdc = breakdown(group_by="day", date_range="7d", currency_id=USDC["address"].upper())[-1]
    assert (usdc["earnings"], usdc["earnings_currency"]) == (3, "USDC")
    months = breakdown(group_by="month", date_range="custom", **{"from": days_ago(45), "to": days_ago(0)})
    assert months[0]["date"] == datetime.fromisoformat(days_ago(45)).date().replace(day=1).isoformat()
    assert sum(row["r2_volume"] for row in months) == 10 and sum(row["attributions"] for row in months) == 7
    weeks = breakdown(group_by="week", date_range="30d", conversion_name="swap")
    assert datetime.fromisoformat(weeks[0]["date"]).weekday() == 0  # weeks start on Monday
    assert [(row["revenue"], row["attributions"]) for row in weeks if row["attributions"]] == [(100, 1)]
    for params in ({}, {"group_by": "year"}, {"group_by": "day", "date_range": "custom", "from": days_ago(3)},
                   {"group_by": "day", "date_range": "7d", "from": days_ago(3)},
                   {"group_by": "day", "from": "1900-01-01", "to": "2299-12-31"}):  # fmt: skip
        error_of(portal.get("/affiliate-portal/stats-breakdown", params={"user_identifier": evm(A), **params}), 400)


def test_new_traders(portal):
    def new_traders(n: int = A, **params) -> list[dict]:
        return exact(portal.get("/affiliate-portal/new-traders", params={"user_identifier": evm(n), **params}))

    assert new_traders() == [{"referrer_identifier": evm(A), "total_new_traders": "2"}]  # B and F; G never converted
    assert new_traders(this_month="true")[0]["total_new_traders"] == "2"
    assert new_traders(**{"to": days_ago(1)})[0]["total_new_traders"] == "0"  # none referred before today
    # B referred C today; C's purchase, counted for B, is dated forty days ago: in all time, not in this month.
    assert (new_traders(B)[0]["total_new_traders"], new_traders(B, this_month="true")[0]["total_new_traders"]) == (
        "1", "0")  # fmt: skip
    error_of(portal.get("/affiliate-portal/new-traders", params={"user_identifier": evm(A), "this_month": "true",
                                                                  "to": days_ago(1)}), 400)  # fmt: skip


def test_paid_volumes_by_level(portal):
    def paid(**params) -> dict:
        return exact(
            portal.get("/affiliate-portal/paid-volumes-by-level", params={"user_identifier": evm(A), **params})
        )

    body = paid()
    prefix = "payout_eligible_"
    assert [body[f"{prefix}l{n}_volume"] for n in (1, 2, 3, 4)] == [Decimal("5.25"), 10, Decimal("40.5"), 0]
    assert [body[f"{prefix}l{n}_revenue"] for n in (1, 2, 3, 4)] == [100, 0, 0, 0]  # E's paid A nothing at level 4
    assert [body[f"{prefix}l{n}_attributions"] for n in (1, 2, 3, 4)] == [4, 1, 1, 0]
    assert (body[f"{prefix}total_volume"], body[f"{prefix}total_revenue"], body[f"{prefix}total_attributions"]) == (
        Decimal("55.75"), 100, 6)  # fmt: skip
    assert (body["user_identifier"], body["user_identifier_type"]) == (evm(A), "evm_address")
    assert paid(this_month="true")[f"{prefix}l2_volume"] == 0
    assert paid(**{"from": days_ago(60), "to": days_ago(30)})[f"{prefix}total_volume"] == 10
    for params in ({"this_month": "true", "from": days_ago(3), "to": days_ago(0)}, {"from": days_ago(3)}):
        error_of(
            portal.get("/affiliate-portal/paid-volumes-by-level", params={"user_identifier": evm(A), **params}), 400
        )


def test_total_stats_with_the_clients_filters(portal, other):
    def total(query: str = "") -> dict:
        return exact(portal.get(f"/affiliate-portal/total-stats{query}"))

    everything = total()
    counts = ("total_affiliates", "active_affiliates", "suspended_affiliates", "total_regions", "total_referred_users")
    assert tuple(everything[k] for k in counts) == (3, 1, 1, 3, 4)  # A, B, D; EU, US, jp; B F, C, E
    # Level 1 only, each conversion once: A's (5.25), B's (C's 10), D's (E's 100); C is no affiliate.
    assert (everything["total_volume"], everything["total_revenue"], everything["total_attributions"]) == (
        Decimal("115.25"), 107, 6)  # fmt: skip
    # A 161.835; B 1 (C's), 2.025 (D's), 2 (E's), 10 (H's) and 50; D 10 (E's), 50 (H's) and 50
    assert everything["total_earnings"] == [{"amount": 3, "currency": "USDC"},
                                            {"amount": Decimal("336.86"), "currency": "point"}]  # fmt: skip
    assert total("?statuses%5B%5D=Active")["total_volume"] == Decimal("5.25")
    assert total("?statuses[]=Active&statuses[]=Paused")["total_affiliates"] == 2
    assert total("?statuses=active,pending")["total_affiliates"] == 2  # §4's form too
    assert total("?regions%5B%5D=Other")["total_volume"] == 10  # B's "US" is no region of the client's
    assert total("?regions[]=JP&regions[]=eu")["total_affiliates"] == 2
    assert total("?regions[]=EU&statuses[]=Paused")["total_affiliates"] == 0  # AND across filters
    assert total("?statuses[]=Terminated")["total_earnings"] == []
    assert total("?audiences%5B%5D=crypto")["total_affiliates"] == 2
    assert total("?statuses[]=")["total_affiliates"] == 3  # an empty filter filters nothing
    error_of(portal.get("/affiliate-portal/total-stats?statuses[]=Retired"), 400)
    error_of(portal.get("/affiliate-portal/total-stats?regions[]=Mars"), 400)
    theirs = eventually(lambda: _with_affiliates(exact(other.get("/affiliate-portal/total-stats")), 1))
    assert (theirs["suspended_affiliates"], theirs["total_volume"]) == (1, 7)


def _with_affiliates(body: dict, count: int) -> dict:
    assert body["total_affiliates"] == count and body["total_volume"] == 7, body
    return body


class Edges:
    """A warehouse answering the tree's level lookups from referrer keys to (user key, referred at) lists, as the SQL
    does (the oldest first, at most `limit`), recording each lookup's referrers."""

    def __init__(self, children: dict[str, list[tuple[str, str]]]):
        self.children, self.lookups = children, []

    async def query(self, sql: str, params: dict) -> list[dict]:
        referrers = [str(key) for key in params.get("referrers", ["root"])]
        self.lookups.append(referrers)
        rows = [{"referrer": referrer, "key": key, "at": at, "user_identifier_type": "email",
                 "user_identifier": f"{key}@example.com"}
                for referrer in referrers for key, at in self.children.get(referrer, [])]  # fmt: skip
        return sorted(rows, key=lambda row: (row["at"], row["user_identifier"]))[: params["limit"]]


class NoAffiliates:
    async def affiliates_among(self, project_id: str, users: list) -> dict:
        return {}


async def test_a_wide_tree_is_read_in_chunks_and_cut_at_its_node_limit():
    """3,000 users at level 1 (their keys too long for one query parameter), 4 each at level 2: the tree keeps the
    10,000 nearest, the oldest first at the level it cuts, and reads no further."""
    first = [(str(10**37 + n), f"2026-01-01 00:00:{n % 60:02d}.000") for n in range(3000)]
    children = {"root": first}
    for key, _ in first:
        children[key] = [(f"{key}{k}", f"2026-02-{int(key) % 28 + 1:02d} 00:00:0{k}.000") for k in range(4)]
    warehouse = Edges(children)
    scope = Scope("p", User(evm(A), "evm_address"))
    levels, _ = await service._levels_below(warehouse, NoAffiliates(), scope)
    assert [len(level) for level in levels] == [3000, service.MAX_TREE_NODES - 3000]
    assert len(warehouse.lookups) > 2  # level 2's referrers in more than one lookup
    assert all(len(param_text([int(key) for key in keys])) < PARAM_BYTES for keys in warehouse.lookups[1:])
    second = sorted((at, f"{key}@example.com") for parent, _ in first for key, at in children[parent])
    kept = [(row["at"], row["user_identifier"]) for row in levels[1]]
    assert kept == second[: service.MAX_TREE_NODES - 3000]  # the oldest of level 2
