"""Text reaches ClickHouse exactly as the client gave it: backslashes, quotes, control characters and all.

ClickHouse reads a query parameter in its escaped text format, where `\\` starts an escape sequence (`\\N` is
NULL, `\\x41` is `A`, a lone final `\\` is an error) and a tab or newline ends the value. So these tests send
such text through both warehouse adapters (the Warehouse port: scalar and array parameters, inserted rows),
and through every endpoint that hands client text to a query: the affiliate search, a user's totals and
ranks, claim history and totals, and the claim check listing's currency filter.

Then every other text a client gives, on both shapes (one project per shape for each world): the payout
configuration's ids, names, event names and currencies, events' names, dedup ids and free-form fields, affiliates'
attributes and their filters, claim hashes, Idempotency-Key, and referral codes in paths. Each text round-trips
exactly (stored, read back, found by exact filters, counted once) or is refused with a 400 in the contract's body.
"""

import uuid
from decimal import Decimal
from urllib.parse import quote

import orjson
import pytest

from rewards.devengines import clickhouse
from rewards.domain.timestamps import format_timestamp
from tests.conftest import SERVICE, evm
from tests.ingest_api.test_claim_checks import SIGNER_KEY, TOKEN_CONFIG, USDC
from tests.support.harness import Api, eventually
from tests.support.warehouses import migrated_warehouse

# What the escaped format reads specially (alone, at the end, combined), and text that only looks dangerous.
NASTY = [
    "\\", "a\\", "\\N", "\\\\N", "\\\\", "'", '"', "`", "\t", "\n", "\r", "\x00", "\\t", "\\n", "\\0", "\\x41",
    "\\'", "a\\'b", "'\\", "\\\t", "x\r\ny\tz\\", "😀", "é\\ü", "{s:String}", "%s", "%(s)s", "' OR '1'='1", "",
]  # fmt: skip


# -- the Warehouse port, on both adapters ----------------------------------------------------------------------


@pytest.fixture(scope="module", params=["chdb", "clickhouse"])
async def warehouse(request, tmp_path_factory):
    """A migrated warehouse of each adapter: in-process chdb, and a ClickHouse server (in a database of its own)."""
    folder = tmp_path_factory.mktemp("escaping") / "warehouse"
    warehouse = await migrated_warehouse(request.param, request, folder, "escaping")
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
    assert api.put("/projects/config", json={**TOKEN_CONFIG, "claim_signer_key": SIGNER_KEY}).status_code == 200
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
    base = Decimal(PURCHASE)  # purchase value × 1 (points); a swap's base is in USDC, no volume in points
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


def _referral_status(api: Api, identifier: str) -> None:
    response = api.get("/referral_codes/status", params=email(identifier))
    assert response.status_code == 200, response.text
    body = response.json()
    if identifier == REFERRER:
        assert body == {"referred": False}
    else:
        assert body["referred"] is True
        assert (body["referrer_identifier"], body["referrer_identifier_type"]) == (canonical(REFERRER), "email")


def _referral_codes(api: Api, identifier: str) -> None:
    """REFERRER's codes, each used by one buyer (`used_by` as stored); a buyer has none (404)."""
    response = api.get("/referral_codes", params={**email(identifier), "page_size": 100})
    if identifier != REFERRER:
        assert response.status_code == 404, response.text
        return
    assert response.status_code == 200, response.text
    codes = response.json()["results"]
    assert len(codes) == response.json()["count"] == len(BUYERS)
    assert sorted(u["identifier"] for c in codes for u in c["used_by"]) == sorted(canonical(b) for b in BUYERS)
    for code in codes:  # and each code alone, by its path
        assert api.get(f"/referral_codes/{code['code']}").json()["used_by"] == code["used_by"]


def _event_status(api: Api, identifier: str) -> None:
    bought = identifier != REFERRER
    for name, created in (("purchase", bought), ("swap", bought), ("purchas", False), ("purchase\\", False)):
        response = api.get("/events/status", params={**email(identifier), "event_name": name})
        assert response.status_code == 200, response.text
        assert response.json() == {"created": created, "paid": name in ("purchase", "swap")}, name


OPERATIONS = {
    "payout totals": _totals,
    "leaderboard": _leaderboard,
    "claim history": _claim_history,
    "claim totals": _claim_totals,
    "rewards-payouts": _rewards_payouts,
    "referral status": _referral_status,
    "referral codes": _referral_codes,
    "event status": _event_status,
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


# -- every other text a client gives: configuration, events, affiliates, claims ----------------------------------

# Each text is, at once: a tier (id and name), a conversion's event_name, a campaign (id and one event name), a token
# currency (address and name), an event's name and dedup_id, an affiliate's name, region, audience and tier, and a
# claim's hash. Each must come back exactly as sent, find exactly its own rows and be counted exactly, or be refused
# with a 400 in the contract's error body: never a 500, never a silent change, never a filter matching more or less.
TEXTS = [
    "\\", "a\\", "\\N", "\\\\N", "'", '"', "`", "\t", "\n", "\r", "\x00", "\x7f", "\\t", "\\0", "\\x41", "\\'", "é😀",
    "{s:String}", "%_", "x\r\ny\tz\\", "a,b", " lead", "trail ",
]  # fmt: skip
BONUS = 1000  # each text's campaign pays it to the text's event


def _index(text: str) -> int:
    return TEXTS.index(text)


def _text_user(text: str) -> dict:
    return {"user_identifier": evm(_index(text) + 1), "user_identifier_type": "evm_address"}


def _text_config(texts: list[str]) -> dict:
    """The text's tier (r1 tells them apart), its conversion (the end-user reward tells them apart), its campaign,
    and a token conversion paying in a currency named by it."""
    tiers, conversions, campaigns = [], [], []
    for text in texts:
        i = _index(text)
        rates = {"r1": f"0.{i + 1:02d}", "r2": "0", "r3": "0", "r4": "0"}
        tiers.append({"id": text, "name": text, "rank": i, "rates": rates})
        conversions.append({"event_name": text, "base": {"fixed": "1"}, "end_user_reward": {"fixed": str(i + 1)}})
        currency = {"address": text, "chain_id": i, "name": text, "decimals": 0}
        conversions.append({"event_name": f"token {i}", "base": {"fixed": str(i + 1)}, "currency": currency,
                            "end_user_reward": {"rate": "1"}})  # fmt: skip
        campaigns.append({"id": text, "event_names": [text], "starts_at": "2020-01-01T00:00:00Z",
                          "ends_at": "2299-01-01T00:00:00Z", "bonus": str(BONUS)})  # fmt: skip
    return {"default_tier": None, "tiers": tiers, "conversions": conversions, "campaigns": campaigns}


def _free_form(text: str) -> dict:
    """The text as keys and values of an event's free-form fields (kept with the event, read by no endpoint)."""
    return {"args": {text: [text, {text: None}]}, "metadata": {text: text, "tracking_id": text, "nested": [[text]]}}


@pytest.fixture(scope="module")
def texts(server, admin) -> dict:
    """One project per shape holding every TEXT in every role (see TEXTS): the configuration the service accepts
    of them, each text's events (by the text's own user), affiliates, and claims of each text's token checks."""
    project = admin.project()
    api = Api(server, admin.key(project, SERVICE), project)
    probes = {text: api.put("/projects/config", json=_text_config([text])) for text in TEXTS}
    accepted = [text for text in TEXTS if probes[text].status_code == 200]
    signing = {"claim_signer_key": SIGNER_KEY}  # closing answers claim forms (API.md §7)
    assert api.put("/projects/config", json={**_text_config(accepted), **signing}).status_code == 200
    sent = {}  # one by one (not a batch), so that a text refused costs only its own events
    for i, text in enumerate(TEXTS):
        value = {"amount": "1", "currency": {"name": text}}  # the base is fixed: the amount pays nothing more
        sent[text] = [
            api.post("/events", json={**_text_user(text), "name": text, "dedup_id": text, **_free_form(text)}),
            api.post("/events", json={**_text_user(text), "name": f"token {i}", "dedup_id": f"token {text}",
                                      "args": {"value": value}}),
        ]  # fmt: skip
    events = [t for t in TEXTS if not _refused(sent[t][0])]
    api.wait_processed(*events, *(f"token {t}" for t in TEXTS if not _refused(sent[t][1])))
    registrations = {}
    for text in TEXTS:
        body = {**_text_user(text), "name": text, "region": text, "audience": text}
        registrations[text] = api.post("/affiliates", json={**body, "tier": text if text in accepted else None})
    registered = sum(r.status_code == 201 for r in registrations.values())
    eventually(lambda: _assert_listed(api, registered))
    paid_in_tokens = [t for t in accepted if sent[t][1].status_code == 201]
    checks = eventually(lambda: _token_checks(api, len(paid_in_tokens)))
    claims = {}
    for check in checks:
        text = check["currency_address"]
        closed = api.post("/claim-checks/close", json={**_text_user(text), "claim_check_ids": [check["id"]]})
        assert closed.status_code == 200, closed.text
        claim = {"hash": text, "claimed_at": 1_800_000_000_000 + _index(text), "claim_check_ids": [check["id"]]}
        claims[text] = api.post("/claim-checks/claims", json=claim)
    claimed = sum(r.status_code == 200 for r in claims.values())
    eventually(lambda: _assert_claimed(api, claimed))
    configured = {c["event_name"] for c in _text_config(accepted)["conversions"]}  # every campaign's name is one too
    yield {"api": api, "probes": probes, "accepted": accepted, "sent": sent, "events": events,
           "paid_in_tokens": paid_in_tokens, "registrations": registrations, "claims": claims,
           "configured": configured}  # fmt: skip
    api.close()


def _token_checks(api: Api, count: int) -> list[dict]:
    listing = api.get("/claim-checks/rewards-payouts", params={"page_size": 100}).json()
    assert listing["total_count"] == count
    return listing["results"]


def _assert_claimed(api: Api, count: int) -> None:
    listing = api.get("/claim-checks/rewards-payouts", params={"status": "claimed", "page_size": 100}).json()
    assert listing["total_count"] == count


def _refused(response) -> bool:
    """Whether the service refused the text with a 400 in the contract's error body (anything else but a success
    fails the test)."""
    if response.status_code // 100 == 2:
        return False
    assert response.status_code == 400, response.text
    body = response.json()
    assert set(body) == {"statusCode", "error", "message"} and body["statusCode"] == 400, body
    return True


@pytest.mark.parametrize("text", TEXTS)
def test_configuration_text_round_trips(texts, text):
    if _refused(texts["probes"][text]):
        return
    i, config = _index(text), texts["api"].get("/projects/config").json()
    [tier] = [tier for tier in config["tiers"] if tier["id"] == text]
    assert (tier["name"], tier["rank"], Decimal(tier["rates"]["r1"])) == (text, i, Decimal(i + 1) / 100)
    assert [c["event_name"] for c in config["conversions"] if c["event_name"] == text] == [text]
    assert {"address": text, "chain_id": i, "name": text, "decimals": 0} in [c.get("currency") for c in
                                                                             config["conversions"]]  # fmt: skip
    assert [c["event_names"] for c in config["campaigns"] if c["id"] == text] == [[text]]


@pytest.mark.parametrize("text", TEXTS)
def test_event_name_and_dedup_id_round_trip_and_pay_their_own_conversion(texts, text):
    api, i = texts["api"], _index(text)
    for dedup_id, response in zip((text, f"token {text}"), texts["sent"][text], strict=True):
        status = "not_found" if _refused(response) else "processed"
        assert api.get("/events/status", params={"dedup_id": dedup_id}).json() == {
            "dedup_id": dedup_id, "status": status}  # fmt: skip
    if text not in texts["events"]:
        return
    assert api.get("/events/status", params={"dedup_id": text + "x"}).json()["status"] == "not_found"
    for name, created in ((text, True), (text + "x", False), ("x" + text, False)):
        response = api.get("/events/status", params={**_text_user(text), "event_name": name})
        assert response.json() == {"created": created, "paid": name in texts["configured"]}, name
    # Only the text's own conversion and campaign paid its event (their amounts tell them from every other text's).
    totals = api.get(f"/payouts/totals/{evm(i + 1)}", params={"identifier_type": "evm_address"}).json()
    expected = {"end_user_reward": i + 1, "campaign_bonus": BONUS} if text in texts["accepted"] else {}
    assert {kind: Decimal(v) for kind, v in totals["by_kind"].items() if Decimal(v)} == expected
    # Sent again, every one is known by its exact dedup_id.
    again = {**_text_user(text), "name": text, "dedup_id": text}
    assert api.post("/events", json=again).status_code == 409


def test_the_text_events_are_counted_once_each(texts):
    api, accepted = texts["api"], texts["accepted"]
    accepted = [text for text in accepted if text in texts["events"]]
    expected = sum(_index(text) + 1 + BONUS for text in accepted)
    assert Decimal(api.get("/payouts/summary", params={"currency": "point"}).json()["total_payouts"]) == expected
    board = api.get("/payouts/leaderboard/users", params={"page_size": 100}).json()
    assert board["total_results"] == len(accepted)
    assert sorted(r["user_identifier"] for r in board["results"]) == sorted(evm(_index(t) + 1) for t in accepted)


@pytest.mark.parametrize("text", TEXTS)
def test_affiliate_attributes_round_trip_and_their_filters_find_exactly_them(texts, text):
    registration = texts["registrations"][text]
    if _refused(registration):
        return
    api, user, body = texts["api"], _text_user(text), registration.json()
    tier = text in texts["accepted"]
    assert (body["name"], body["region"], body["audience"]) == (text, text, text)
    if tier:
        assert body["tier"] == {"id": text, "name": text, "rank": _index(text)}
        assert Decimal(str(body["r1"])) == Decimal(_index(text) + 1) / 100
    for name in ("regions", "audiences", *(("tiers",) if tier else ())):
        response = api.get("/affiliates", params={name: text, "per_page": 100})
        assert response.status_code == 200, (name, response.text)
        found = [(a["user_identifier"], a["region"]) for a in response.json()["results"]]
        assert found == [(user["user_identifier"], text)], (name, text, len(found))


@pytest.mark.parametrize("text", TEXTS)
def test_claim_hash_and_currency_text_round_trip(texts, text):
    if text not in texts["paid_in_tokens"]:  # no such currency, or no event: nothing was paid in it
        return
    api, i = texts["api"], _index(text)
    history = api.get("/claim-checks/claim-history", params=_text_user(text))
    assert history.status_code == 200, history.text
    currency = {"currency_address": text, "currency_chain_id": i, "currency_name": text, "currency_decimals": 0}
    if _refused(texts["claims"][text]):
        assert history.json()["results"] == []
    else:
        assert history.json()["results"] == [{"hash": text, "claimed_at": format_timestamp(1_800_000_000_000 + i),
                                              **currency, "amount": str(i + 1)}]  # fmt: skip
    group = "unclaimed" if texts["claims"][text].status_code != 200 else "claimed"
    totals = api.get("/claim-checks/totals", params=_text_user(text)).json()
    assert totals[group] == [{**currency, "amount": str(i + 1), "status": group}]
    # The listing's currency filter (ASCII case-insensitive) finds the checks of this text's currency, and only them.
    listing = api.get("/claim-checks/rewards-payouts", params={"currency_address": text, "page_size": 100})
    assert listing.status_code == 200, listing.text
    found = sorted(c["currency_address"] for c in listing.json()["results"])
    assert found == sorted(t for t in texts["paid_in_tokens"] if t.lower() == text.lower())
    [mine] = api.get("/claim-checks/rewards-payouts", params=_text_user(text)).json()["results"]
    claimed = group == "claimed"
    assert (mine["currency_address"], mine["currency_name"], mine["hash"]) == (text, text, text if claimed else None)


def test_event_texts_are_stored_in_the_warehouse_as_sent(server, texts):
    """What no endpoint reads back (the conversion's name, dedup_id, args, metadata) is in the warehouse as sent.
    The production shape's ClickHouse server is read directly; chdb lives inside `rewards serve`."""
    if server.shape != "production":
        pytest.skip("the embedded warehouse is inside the server's process")
    client = clickhouse.connect(server.env["CLICKHOUSE_URL"])
    try:
        rows = client.query(
            "SELECT dedup_id, name, args, metadata FROM conversions WHERE project_id = {p:String}",
            parameters={"p": texts["api"].project_id},
        ).result_rows
    finally:
        client.close()
    stored = {dedup_id: (name, orjson.loads(args), orjson.loads(metadata)) for dedup_id, name, args, metadata in rows}
    for text in texts["events"]:
        assert stored.pop(text) == (text, _free_form(text)["args"], _free_form(text)["metadata"]), repr(text)
    for i, text in enumerate(TEXTS):
        if texts["sent"][text][1].status_code == 201:
            token = {"value": {"amount": "1", "currency": {"name": text}}}
            assert stored.pop(f"token {text}")[:2] == (f"token {i}", token), repr(text)
    assert stored == {}


# -- texts that collide with what the service itself writes, or that a path or a lookup changes ---------------------


def test_a_token_currency_whose_address_is_point_pays_no_points(api):
    """Payouts record a token's address where points record `point`: a currency named so must not become points."""
    fake = {"address": "point", "chain_id": 1, "name": "FAKE", "decimals": 6}
    conversion = {"event_name": "swap", "base": {"fixed": "2"}, "currency": fake, "end_user_reward": {"rate": "1"}}
    response = api.put("/projects/config", json={"default_tier": None, "tiers": [], "conversions": [conversion]})
    if _refused(response):
        return
    sent = {**_text_user("\\"), "name": "swap", "dedup_id": "fake-point"}
    assert api.post("/events/batch", json={"events": [sent]}).json() == {"ingested_events": 1}
    api.wait_processed("fake-point")
    eventually(lambda: _token_checks(api, 1))  # paid in FAKE: 2 whole tokens, 2000000 raw units
    assert api.get("/payouts/summary", params={"currency": "point"}).json() == {"total_payouts": "0"}
    totals = api.get(f"/payouts/totals/{sent['user_identifier']}", params={"identifier_type": "evm_address"}).json()
    assert totals["total_points"] == "0"


def test_an_email_with_a_slash_reads_its_totals_by_path(api):
    """`/` is valid in an email's local part (and accepted everywhere else); percent-encoded in the path, it is
    still the identifier, not a path separator."""
    config = {"default_tier": None, "tiers": [], "conversions": [
        {"event_name": "purchase", "base": {"fixed": "1"}, "end_user_reward": {"fixed": "7"}}]}  # fmt: skip
    assert api.put("/projects/config", json=config).status_code == 200
    identifier = "a/b@example.com"
    response = api.post("/events", json={**email(identifier), "name": "purchase", "dedup_id": "slash"})
    if _refused(response):
        return
    api.wait_processed("slash")
    response = api.get(f"/payouts/totals/{quote(identifier, safe='')}", params={"identifier_type": "email"})
    assert response.status_code == 200, response.text
    assert (response.json()["user_identifier"], response.json()["total_points"]) == (identifier, "7")


def _code_variants(code: str) -> dict[str, str]:
    """Other texts than the code that Python's strip() and upper() turn into it."""
    letter = next(c for c in code if c in "SI")
    lookalike = {"S": "ſ", "I": "ı"}[letter]  # LATIN SMALL LETTER LONG S, DOTLESS I: upper() gives S, I
    return {
        "final newline": code + "\n",
        "leading tab": "\t" + code,
        "line separator": code + "\u2028",
        "no-break space": code + "\u00a0",
        "lookalike letter": code.replace(letter, lookalike, 1),
    }


def test_referral_codes_match_case_insensitively_and_no_other_text(api):
    owner = {"user_identifier": evm(1), "user_identifier_type": "evm_address"}
    codes = api.post("/referral_codes", json={**owner, "quantity": 50}).json()
    code = next(c["code"] for c in codes if set(c["code"]) & set("SI"))  # 50 codes without S or I: p < 1e-4
    assert api.get(f"/referral_codes/{code.lower()}").json()["code"] == code  # API.md §2: case-insensitive
    wrongly_found = []
    for n, (name, text) in enumerate(_code_variants(code).items(), start=2):
        path = f"/referral_codes/{quote(text, safe='')}"
        user = {"user_identifier": evm(n), "user_identifier_type": "evm_address"}
        answers = [api.get(path), api.patch(path, json={"max_uses": 99}), api.patch(path + "/use", json=user)]
        for response in answers:
            if response.status_code != 404:
                _refused(response)  # a 400 is as good
        if any(r.status_code // 100 == 2 for r in answers):
            wrongly_found.append(name)
    record = api.get(f"/referral_codes/{code}").json()
    assert (record["current_uses"], record["max_uses"], wrongly_found) == (0, None, [])


def test_claim_check_ids_are_looked_up_as_given(api):
    """No check has these ids: each is a 404 naming it as sent (1 to 64 characters; none is another's id)."""
    user = {"user_identifier": evm(1), "user_identifier_type": "evm_address"}
    signing = {"default_tier": None, "tiers": [], "claim_signer_key": SIGNER_KEY}  # else close is 409 before looking
    assert api.put("/projects/config", json=signing).status_code == 200
    for check_id in [t for t in NASTY if t] + ["é" * 64]:
        close = api.post("/claim-checks/close", json={**user, "claim_check_ids": [check_id]})
        claim = api.post("/claim-checks/claims", json={"hash": check_id, "claim_check_ids": [check_id]})
        for response in (close, claim):
            assert response.status_code == 404, (check_id, response.text)
            assert check_id in response.json()["message"]


PROOF_TEXTS = ["\\", "\\N", "'", '"', "\t", "\n", "\x00", "\x7f", "é😀", "{s:String}", ""]


def test_code_use_proof_texts_are_accepted_or_refused(api):
    """`signature`, `signature_message` and `chain_id` (a string or an integer) are stored with the use."""
    code = api.post("/referral_codes", json={"user_identifier": evm(1), "user_identifier_type": "evm_address",
                                             "quantity": 1}).json()[0]["code"]  # fmt: skip
    used = 0
    proofs = [(field, text) for field in ("signature", "signature_message", "chain_id") for text in PROOF_TEXTS]
    for n, (field, text) in enumerate(proofs):
        user = {"user_identifier": evm(n + 2), "user_identifier_type": "evm_address"}
        response = api.patch(f"/referral_codes/{code}/use", json={**user, field: text})
        used += not _refused(response)
    assert api.get(f"/referral_codes/{code}").json()["current_uses"] == used


# Header values as HTTP carries them (no CR, LF, NUL or DEL; surrounding spaces are not part of the value).
IDEMPOTENCY_KEYS = ["\\", "\\N", "\\\\N", "'", '"', "a\tb", "%00", "é😀", "{s:String}", "k" * 255]


@pytest.mark.parametrize("key", IDEMPOTENCY_KEYS)
def test_idempotency_keys_are_compared_as_sent(api, key):
    def batch(dedup_id: str) -> dict:
        return {"events": [{**_text_user("\\"), "name": "n", "dedup_id": dedup_id}]}

    headers = {"Idempotency-Key": key.encode()}
    assert api.post("/events/batch", json=batch("first"), headers=headers).json() == {"ingested_events": 1}
    assert api.post("/events/batch", json=batch("first"), headers=headers).json() == {"ingested_events": 1}  # replay
    assert api.post("/events/batch", json=batch("other"), headers=headers).status_code == 409
    # Keys that an unescaped store would read alike are other keys.
    for other in ("", "N", "\\\\", "\\n", ("x" + key)[:255]):  # at most 8 batches in all: the limit is 10 a minute
        if other != key:
            response = api.post("/events/batch", json=batch("first"), headers={"Idempotency-Key": other.encode()})
            assert response.json() == {"ingested_events": 0}, other  # not the first key's stored answer
    assert api.get("/events/status", params={"dedup_id": "other"}).json()["status"] == "not_found"


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("POST", "/referral_codes?user_identifier=a%FF%40example.com&user_identifier_type=email&quantity=1"),
        ("GET", "/payouts/totals/a%FF%40example.com?identifier_type=email"),
        ("GET", "/referral_codes/status?user_identifier=%C0%80%40example.com&user_identifier_type=email"),
    ],
)
def test_percent_encoded_text_that_is_not_utf8_is_refused(api, method, target):
    """`%FF` (or the overlong `%C0%80`) decodes to no text: read as U+FFFD, it would name another user."""
    response = api.request(method, target)
    assert _refused(response), (response.status_code, response.text)


def test_name_sorts_case_insensitively_beyond_ascii(api):
    names = ["Éz", "éa", "Ab", "aa", "Ωb", "ωa"]
    for n, name in enumerate(names, start=1):
        body = {"user_identifier": evm(n), "user_identifier_type": "evm_address", "name": name}
        assert api.post("/affiliates", json=body).status_code == 201
    eventually(lambda: _assert_listed(api, len(names)))
    page = api.get("/affiliates", params={"sort_by": "name", "sort_order": "asc"}).json()["results"]
    assert [a["name"] for a in page] == sorted(names, key=str.casefold)  # aa Ab éa Éz ωa Ωb
