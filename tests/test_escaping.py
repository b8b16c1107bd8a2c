"""Text reaches ClickHouse exactly as the client gave it: backslashes, quotes, control characters and all.

ClickHouse reads a query parameter in its escaped text format, where `\\` starts an escape sequence (`\\N` is
NULL, `\\x41` is `A`, a lone final `\\` is an error) and a tab or newline ends the value. So these tests send
such text through both warehouse adapters (the Warehouse port: scalar and array parameters, inserted rows),
and through every endpoint that hands client text to a query: the affiliate search, a user's totals and
ranks, claim history and totals, and the claim check listing's currency filter.
"""

import uuid
from decimal import Decimal
from urllib.parse import quote

import pytest

from rewards.devengines import clickhouse
from rewards.embedded.chdb_warehouse import ChdbWarehouse
from rewards.production.clickhouse_warehouse import ClickHouseWarehouse
from tests.conftest import SERVICE, evm
from tests.harness import Api, eventually
from tests.test_claim_checks import TOKEN_CONFIG, USDC

# What the escaped format reads specially (alone, at the end, combined), and text that only looks dangerous.
NASTY = [
    "\\", "a\\", "\\N", "\\\\N", "\\\\", "'", '"', "`", "\t", "\n", "\r", "\x00", "\\t", "\\n", "\\0", "\\x41",
    "\\'", "a\\'b", "'\\", "\\\t", "x\r\ny\tz\\", "😀", "é\\ü", "{s:String}", "%s", "%(s)s", "' OR '1'='1", "",
]  # fmt: skip


# -- the Warehouse port, on both adapters ----------------------------------------------------------------------


@pytest.fixture(scope="module", params=["chdb", "clickhouse"])
async def warehouse(request, tmp_path_factory):
    """A migrated warehouse of each adapter: in-process chdb, and a ClickHouse server (in a database of its own)."""
    if request.param == "chdb":
        warehouse = ChdbWarehouse(tmp_path_factory.mktemp("escaping") / "warehouse")
    else:
        import clickhouse_connect

        url = request.getfixturevalue("clickhouse_url")  # under CI=true, no server is a failure, not a skip
        database = f"escaping_{uuid.uuid4().hex[:10]}"
        admin = clickhouse.connect(url)
        admin.command(f"CREATE DATABASE {database}")
        admin.close()
        warehouse = ClickHouseWarehouse(await clickhouse_connect.get_async_client(dsn=url, database=database))
    await warehouse.migrate()
    yield warehouse
    await warehouse.close()


@pytest.mark.parametrize("value", NASTY)
async def test_a_string_parameter_arrives_as_given(warehouse, value):
    rows = await warehouse.query(
        "SELECT {s:String} AS s, toString(length({s:String})) AS bytes,"
        " {n:Nullable(String)} AS nullable, {c:LowCardinality(String)} AS low",
        {"s": value, "n": value, "c": value},
    )
    assert rows == [{"s": value, "bytes": str(len(value.encode())), "nullable": value, "low": value}]


async def test_array_parameters_arrive_as_given(warehouse):
    rows = await warehouse.query(
        "SELECT {a:Array(String)} AS a, {t:Array(String)} AS t, {one:Array(String)} AS one,"
        " {n:Array(Nullable(String))} AS n, {e:Array(String)} AS e",
        {"a": NASTY, "t": tuple(NASTY), "one": ["\\"], "n": ["\\N", None, "\t"], "e": []},
    )
    assert rows == [{"a": NASTY, "t": NASTY, "one": ["\\"], "n": ["\\N", None, "\t"], "e": []}]
    found = await warehouse.query("SELECT arrayFilter(x -> has({a:Array(String)}, x), {b:Array(String)}) AS f", {
        "a": ["\\N", "a\\"], "b": ["", "\\N", "a\\", "a"]})  # fmt: skip
    assert found == [{"f": ["\\N", "a\\"]}]  # `\N` is not the empty string, nor NULL


async def test_other_parameter_types(warehouse):
    big = 2**128 - 1
    rows = await warehouse.query(
        "SELECT toString({i:Int64}) AS i, {u:UInt8} AS u, toString({k:Array(UInt128)}) AS k, toString({d:Date32}) AS d,"
        " toString({t:DateTime64(3, 'UTC')}) AS t, {missing:Nullable(String)} AS missing, {f:Float64} AS f",
        {"i": -5, "u": True, "k": [1, big], "d": "2024-02-29", "t": "2024-02-29 23:59:59.999", "missing": None,
         "f": 0.5},
    )  # fmt: skip
    assert rows == [{"i": "-5", "u": 1, "k": f"[1,{big}]", "d": "2024-02-29", "t": "2024-02-29 23:59:59.999",
                     "missing": None, "f": 0.5}]  # fmt: skip


async def test_inserted_text_reads_back_as_given_and_matches_its_parameter(warehouse):
    project = f"escaping_{uuid.uuid4().hex[:10]}"
    rows = [
        {"project_id": project, "dedup_id": f"{n:03d}", "name": value, "user_identifier": value + "@x.io",
         "user_identifier_type": "email", "timestamp": "2024-01-01 00:00:00.000",
         "received_at": "2024-01-01 00:00:00.000", "batch_id": "b", "args": value, "metadata": "{}"}
        for n, value in enumerate(NASTY)
    ]  # fmt: skip
    await warehouse.insert("conversions", rows, dedup_token=f"escaping-{project}")
    stored = await warehouse.query(
        "SELECT name, user_identifier, args FROM conversions WHERE project_id = {p:String} ORDER BY dedup_id",
        {"p": project},
    )
    assert stored == [{"name": v, "user_identifier": v + "@x.io", "args": v} for v in NASTY]
    for value in NASTY:  # each value as a parameter finds its own row, and only that one
        found = await warehouse.query(
            "SELECT name FROM conversions WHERE project_id = {p:String} AND name = {v:String}"
            " AND user_identifier IN {ids:Array(String)}",
            {"p": project, "v": value, "ids": [value + "@x.io"]},
        )
        assert found == [{"name": value}], repr(value)


# -- the endpoints, on both shapes -----------------------------------------------------------------------------

# Email identifiers as the client sends them (valid by our rule; stored lower-cased: `\N` becomes `\n`, which
# the escaped format would read as a newline). REFERRER referred every buyer.
REFERRER = "Bs3\\Nn@Example.com"
BUYERS = ["o'neil\"x@example.com\\", "\\\\N@example.com", "tab\\t@example.com", "a\\x41\\b@example.com",
          "\\N@example.com"]  # fmt: skip
USERS = [REFERRER, *BUYERS]
# Affiliates (evm addresses) whose names the search must find, or not, by substring.
NAMES = ["back\\slash", "trailing\\", "\\N marks null", "it's", 'say "hi"', "tab\there", "new\nline", "cr\rhere",
         "nul\x00here", "two chars \\t", "emoji 😀", "plain", "hex \\x41"]  # fmt: skip
REFERRER_NAME = "Ref\\erer 'quoted'"
SEARCHES = [
    "\\", "g\\", "\\N", "\\n", "\\\\N", "'", '"', "b\th", "w\nl", "r\rh", "\x00", "\\t", "😀", "\\x41", "\\x62ack",
    "%", "_", "' OR '1'='1", "\\\\", "@example.com\\",
]  # fmt: skip
PURCHASE, REVENUE = "100", "100"  # each buyer's purchase value and swap revenue
HASH = "0x" + "3" * 64


def email(identifier: str) -> dict:
    return {"user_identifier": identifier, "user_identifier_type": "email"}


def canonical(identifier: str) -> str:
    return identifier.lower()


@pytest.fixture(scope="module")
def world(server, admin) -> dict:
    """One project per shape: NAMES registered as affiliates; REFERRER refers every buyer; each buyer purchases
    (points) and swaps (USDC claim checks); REFERRER registers afterwards; then every user's checks are closed
    and claimed in one transaction."""
    project = admin.project()
    api = Api(server, admin.key(project, SERVICE), project)
    assert api.put("/projects/config", json=TOKEN_CONFIG).status_code == 200
    for n, name in enumerate(NAMES, start=1):
        response = api.post("/affiliates", json={"user_identifier": evm(n), "user_identifier_type": "evm_address",
                                                 "name": name})  # fmt: skip
        assert response.status_code == 201, response.text
    codes = api.post("/referral_codes", json={**email(REFERRER), "quantity": len(BUYERS)})
    assert codes.status_code == 201, codes.text
    for code, buyer in zip([c["code"] for c in codes.json()], BUYERS, strict=True):
        assert api.patch(f"/referral_codes/{code}/use", json=email(buyer)).status_code == 200
    events = []
    for n, buyer in enumerate(BUYERS):
        value = {"amount": PURCHASE, "currency": {"name": "USD"}}
        events.append({**email(buyer), "name": "purchase", "dedup_id": f"p{n}", "args": {"value": value}})
        revenue = {"amount": REVENUE, "currency": {"name": "USD"}}
        events.append({**email(buyer), "name": "swap", "dedup_id": f"s{n}", "args": {"revenue": revenue}})
    response = api.post("/events/batch", json={"events": events})
    assert response.json() == {"ingested_events": len(events)}, response.text
    api.wait_processed(*(e["dedup_id"] for e in events))
    registered = api.post("/affiliates", json={**email(REFERRER), "name": REFERRER_NAME})
    assert registered.status_code == 201, registered.text
    # The checks come from the whole project's listing: the per-user reads are what the tests below try.
    listed = api.get("/claim-checks/rewards-payouts", params={"page_size": 100})
    assert listed.status_code == 200, listed.text
    ids: dict[str, list[str]] = {}
    for check in listed.json()["results"]:
        ids.setdefault(check["user_identifier"], []).append(check["id"])
    assert sorted(ids) == sorted(canonical(u) for u in USERS)
    for identifier in USERS:
        closed = api.post(
            "/claim-checks/close", json={**email(identifier), "claim_check_ids": ids[canonical(identifier)]}
        )
        assert closed.status_code == 200, closed.text
    claim = {
        "hash": HASH,
        "claimed_at": "2026-11-20T10:00:00Z",
        "claim_check_ids": [c["id"] for c in listed.json()["results"]],
    }
    assert api.post("/claim-checks/claims", json=claim).status_code == 200
    affiliates = {name: evm(n) for n, name in enumerate(NAMES, start=1)} | {REFERRER_NAME: canonical(REFERRER)}
    eventually(lambda: _assert_listed(api, len(affiliates)))  # the registration after the events, too
    eventually(lambda: _assert_all_claimed(api))
    yield {"api": api, "affiliates": affiliates, "registered": registered.json()}
    api.close()


def _assert_listed(api: Api, count: int) -> None:
    assert api.get("/affiliates", params={"per_page": 100}).json()["total_count"] == count


def _assert_all_claimed(api: Api) -> None:
    listing = api.get("/claim-checks/rewards-payouts", params={"page_size": 100}).json()
    assert listing["total_count"] == 2 * len(BUYERS) and {c["status"] for c in listing["results"]} == {"claimed"}


@pytest.mark.parametrize("search", SEARCHES)
def test_affiliate_search_matches_the_text_as_given(world, search):
    response = world["api"].get("/affiliates", params={"query": search, "per_page": 100})
    assert response.status_code == 200, response.text
    found = sorted(a["name"] for a in response.json()["results"])
    # A case-insensitive substring of the name or the identifier (no referral code holds these characters).
    # The listing trims the query: whitespace stays searched for inside it only.
    text = search.strip().lower()
    expected = sorted(n for n, i in world["affiliates"].items() if text in n.lower() + "\x01" + i.lower())
    assert found == expected
    assert response.json()["total_count"] == len(expected)
    assert len(found) < len(world["affiliates"])  # `\N` (NULL, or empty) would have matched every affiliate


def test_the_searches_find_what_they_must():
    """The expectations above are not vacuous: the tricky searches do find their affiliates."""
    names = [*NAMES, REFERRER_NAME]
    assert [n for n in names if "\\n" in n.lower()] == ["\\N marks null"]  # plus REFERRER by identifier
    assert sorted(n for n in names if "\\" in n) == sorted(["back\\slash", "trailing\\", "\\N marks null",
                                                            "two chars \\t", "hex \\x41", REFERRER_NAME])  # fmt: skip
    assert [n for n in names if "\t" in n] == ["tab\there"] and [n for n in names if "\x00" in n] == ["nul\x00here"]
    assert not [n for n in names if "\\x62ack" in n.lower()]  # read with escapes live, it is "back"


def test_registration_counts_what_a_backslashed_user_did_before(world):
    body = world["registered"]
    assert (body["user_identifier"], body["name"]) == (canonical(REFERRER), REFERRER_NAME)
    base = Decimal(PURCHASE) + Decimal(REVENUE) * Decimal("0.3")  # purchase value × 1, swap revenue × 0.3
    assert Decimal(body["r1_volume"]) == base * len(BUYERS) and body["referred_users"] == len(BUYERS)
    assert Decimal(body["total_earnings"]) == (50 + Decimal(PURCHASE) * Decimal("0.1")) * len(BUYERS)


def _points(identifier: str) -> Decimal:
    """Points earned: REFERRER a referral reward (50) and a commission (r1 0.1) per buyer; a buyer an end-user
    reward (10) and the referred user's reward (10)."""
    if identifier == REFERRER:
        return (50 + Decimal(PURCHASE) * Decimal("0.1")) * len(BUYERS)
    return Decimal(20)


def _usdc(identifier: str) -> int:
    """USDC (6 decimals) of the user's checks: a swap's base is 30; the buyer gets half, REFERRER r1 0.1 of it."""
    base = Decimal(REVENUE) * Decimal("0.3")
    return int((base * Decimal("0.1") * len(BUYERS) if identifier == REFERRER else base / 2) * 10**6)


def _totals(api: Api, identifier: str) -> None:
    response = api.get(f"/payouts/totals/{quote(identifier, safe='')}", params={"identifier_type": "email"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["user_identifier"], body["user_identifier_type"]) == (canonical(identifier), "email")
    assert Decimal(body["total_points"]) == _points(identifier)


def _leaderboard(api: Api, identifier: str) -> None:
    board = "payouts" if identifier == REFERRER else "users"  # as an affiliate, or as an end user
    response = api.get(f"/payouts/leaderboard/{board}", params=email(identifier))
    assert response.status_code == 200, response.text
    [row] = response.json()["results"]
    assert (row["user_identifier"], row["user_identifier_type"]) == (canonical(identifier), "email")
    assert Decimal(row["total_amount"]) == _points(identifier)


def _claim_history(api: Api, identifier: str) -> None:
    response = api.get("/claim-checks/claim-history", params=email(identifier))
    assert response.status_code == 200, response.text
    [row] = response.json()["results"]
    assert (row["hash"], row["currency_address"], row["amount"]) == (HASH, USDC["address"], str(_usdc(identifier)))


def _claim_totals(api: Api, identifier: str) -> None:
    response = api.get("/claim-checks/totals", params=email(identifier))
    assert response.status_code == 200, response.text
    [claimed] = response.json()["claimed"]
    assert (claimed["currency_address"], claimed["amount"]) == (USDC["address"], str(_usdc(identifier)))


def _rewards_payouts(api: Api, identifier: str) -> None:
    response = api.get("/claim-checks/rewards-payouts", params={**email(identifier), "page_size": 100})
    assert response.status_code == 200, response.text
    checks = response.json()["results"]
    assert {c["user_identifier"] for c in checks} == {canonical(identifier)}
    assert len(checks) == (len(BUYERS) if identifier == REFERRER else 1)


OPERATIONS = {
    "payout totals": _totals,
    "leaderboard": _leaderboard,
    "claim history": _claim_history,
    "claim totals": _claim_totals,
    "rewards-payouts": _rewards_payouts,
}


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("identifier", USERS)
def test_a_backslashed_user_sees_their_own_figures(world, operation, identifier):
    OPERATIONS[operation](world["api"], identifier)


@pytest.mark.parametrize(
    "address",
    ["\\", "0x\\", "\\N", "\\\\N", "a\tb", "\n", "\r", "\x00", "'", "\\'", "\\x30" + USDC["address"][1:]],
)
def test_currency_address_filter_takes_the_text_as_given(world, address):
    # With escapes live, the last one read as USDC's own address (`\x30` is `0`).
    response = world["api"].get("/claim-checks/rewards-payouts", params={"currency_address": address})
    assert response.status_code == 200, response.text
    assert response.json() == {"results": [], "total_count": 0, "next_page": None}


def test_currency_address_filter_still_finds_the_currency(world):
    response = world["api"].get("/claim-checks/rewards-payouts", params={"currency_address": USDC["address"].upper()})
    assert response.status_code == 200 and response.json()["total_count"] == 2 * len(BUYERS)
