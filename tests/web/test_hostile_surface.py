"""Issue 26's classes of hostile input to the published client's surface, on both shapes: JSON values of the wrong
type (a boolean, an array, an object, where a time, an amount, an integer or a text is expected), the time bounds of
every read, and request lines past the server's limit. (Replayed signatures: tests/domain/test_signatures.py; codes
named like a route: tests/ingest_api/test_affiliates.py.)"""

import httpx
import pytest

from tests.conftest import evm
from tests.web.test_auth import error_of
from tests.web.test_hostile_reads import ALICE, BOB

WRONG_TYPES = [True, [], {"a": 1}]  # a boolean, an array, an object (false, [1], {} are refused alike)
EVM = "evm_address"
A, B = evm(1), evm(2)
CHECK_ID = "00000000-0000-0000-0000-000000000001"

# Each write of the client's surface and of API.md §2-§5 with a body, and the field set to a wrong type in it. Every
# other field is valid, so the 400 must name that field: a wrong type is refused as such, never read as something.
WRITES = [
    ("POST", "/claim-checks/claims", {"hash": "0xabc", "claim_check_ids": [CHECK_ID], "claimed_at": 1}, "claimed_at"),
    ("POST", "/claim-checks/claims", {"hash": "0xabc", "claim_check_ids": [CHECK_ID]}, "hash"),
    ("POST", "/claim-checks/claims", {"hash": "0xabc", "claim_check_ids": [CHECK_ID]}, "claim_check_ids"),
    ("POST", "/claim-checks/close", {"userIdentifier": A, "userIdentifierType": EVM, "claim_check_ids": [CHECK_ID]},
     "userIdentifier"),
    ("POST", "/claim-checks/claim", {"user_identifier": A, "user_identifier_type": EVM}, "user_identifier"),
    ("POST", "/referral_codes", {"user_identifier": A, "user_identifier_type": EVM, "quantity": 1}, "quantity"),
    ("POST", "/referral_codes", {"user_identifier": A, "user_identifier_type": EVM, "max_uses": 3}, "max_uses"),
    ("POST", "/referral_codes", {"user_identifier": A, "user_identifier_type": EVM}, "user_identifier_type"),
    ("PATCH", "/referral_codes/{code}", {"max_uses": 3}, "max_uses"),
    ("PATCH", "/referral_codes/{code}/use", {"user_identifier": B, "user_identifier_type": EVM, "chain_id": 1},
     "chain_id"),
    ("PATCH", "/referral_codes/{code}/use", {"user_identifier": B, "user_identifier_type": EVM}, "signature"),
    ("PATCH", "/referral_codes/{code}/use", {"user_identifier": B, "user_identifier_type": EVM}, "user_identifier"),
    ("POST", "/affiliates", {"user_identifier": B, "user_identifier_type": EVM, "name": "b"}, "name"),
    ("POST", "/affiliates", {"user_identifier": B, "user_identifier_type": EVM}, "region"),
    ("POST", "/affiliates", {"address": B, "identifier_type": EVM, "code": "bcode", "name": "b"}, "user_rebate_rate"),
    ("POST", "/affiliates", {"address": B, "identifier_type": EVM, "code": "bcode", "name": "b"}, "account_chain_id"),
    ("POST", "/affiliates", {"address": B, "identifier_type": EVM, "code": "bcode", "name": "b"}, "code"),
    ("POST", f"/affiliates/{A}", {"identifier_type": EVM, "code": "acode2"}, "account_chain_id"),
    ("POST", f"/affiliates/{A}/rebate-rate", {"identifier_type": EVM, "code": "acode", "rebate_rate": 0.1},
     "rebate_rate"),
    ("POST", "/events", {"name": "pageview", "metadata": {"tracking_id": "t1"}}, "account_chain_id"),
    ("POST", "/events", {"name": "pageview", "metadata": {"tracking_id": "t1"}}, "signature"),
    ("POST", "/events", {"name": "pageview", "metadata": {"tracking_id": "t1"}}, "user_address"),
    ("POST", "/events", {"name": "purchase", "dedup_id": "d1", "user_identifier": A, "user_identifier_type": EVM},
     "timestamp"),
    ("POST", "/events", {"name": "purchase", "dedup_id": "d1", "user_identifier": A, "user_identifier_type": EVM},
     "dedup_id"),
]  # fmt: skip


@pytest.fixture
def surface(api):
    """A project with Alice's affiliate code `acode` (so that code and affiliate writes reach their types)."""
    created = api.post("/affiliates", json={"address": A, "identifier_type": EVM, "code": "acode", "name": "a"})
    assert created.status_code == 201, created.text
    return api


@pytest.mark.parametrize("value", WRONG_TYPES, ids=["true", "array", "object"])
@pytest.mark.parametrize("method,path,body,field", WRITES, ids=lambda p: p if isinstance(p, str) else "")
def test_a_value_of_the_wrong_json_type_is_refused_naming_its_field(surface, method, path, body, field, value):
    response = surface.request(method, path.replace("{code}", "acode"), json={**body, field: value})
    messages = error_of(response, 400)
    messages = messages if isinstance(messages, list) else [messages]
    assert any(field in message for message in messages), messages


def test_a_boolean_claim_time_records_nothing(surface):
    """The probe's own case: `"claimed_at": true` was recorded as 1970-01-01T00:00:00.001Z."""
    response = surface.post(
        "/claim-checks/claims", json={"hash": "0x1", "claim_check_ids": [CHECK_ID], "claimed_at": True}
    )
    assert error_of(response, 400) == "claimed_at must be an ISO 8601 timestamp or epoch milliseconds"


# -- the time bounds of every read: one rule (rewards.domain.timestamps, "the time bounds of a read") -----------------


YEAR_10000_MS = "253402300800000"
FAR_FUTURE = [YEAR_10000_MS, "9" * 20, "9999-12-31", "9999-12-31T23:59:59Z"]
FAR_PAST = ["0", "0001-01-01", "1000-01-01T00:00:00Z"]
BOUND_ERROR = "must be an ISO 8601 date or timestamp, or epoch milliseconds"
PORTAL = {"user_identifier": ALICE}
# Each read with time bounds: its path, the rest of its query, and the names of its lower and upper bound.
READS = [
    ("/payouts/leaderboard/payouts", {}, "from", "to"),
    ("/payouts/leaderboard/users", {}, "from", "to"),
    ("/payouts", {"type": "point", "user_identifier": BOB, "identifier_type": EVM}, "from", "to"),
    ("/payouts/movements", {"type": "point", "user_identifier": BOB, "identifier_type": EVM}, "from_date", "to_date"),
    ("/payouts/by-referrer", {"user_identifier": ALICE, "user_identifier_type": EVM}, "from_date", "to_date"),
    ("/claim-checks/rewards-payouts", {"user_identifier": ALICE, "user_identifier_type": EVM}, "from", "to"),
    ("/affiliate-portal/stats", PORTAL, "from", "to"),
    ("/affiliate-portal/paid-volumes-by-level", {**PORTAL, "from": "2000-01-01", "to": "2200-01-01"}, "from", "to"),
    ("/affiliate-portal/new-traders", {**PORTAL, "from": "2000-01-01", "to": "2200-01-01"}, "from", "to"),
    ("/affiliate-portal/stats-breakdown", {**PORTAL, "group_by": "month", "date_range": "custom",
                                          "from": "2026-01-01", "to": "2026-12-31"}, "from", "to"),
    ("/affiliates", {}, "dateFrom", "dateTo"),
    ("/dead-letters", {}, "from", "to"),
]  # fmt: skip
# Reads with time bounds whose limit (10 a minute per key) this module's dozens of reads would pass: their far and bad
# bounds are tested beside them (tests/query_api/test_exports.py).
LIMITED_READS = {"/exports/payouts", "/exports/conversions"}


@pytest.fixture(scope="module")
def paid(server):
    """Bob, referred by Alice, bought for 5 (tests.web.test_hostile_reads): every read above has a figure to keep."""
    from tests.web.test_hostile_reads import referred_purchase

    with referred_purchase(server) as api:
        yield api


def _without_clock(body):
    """The answer without the time it was computed at (leaderboards' `calculated_at`)."""
    return {k: v for k, v in body.items() if k != "calculated_at"} if isinstance(body, dict) else body


def test_the_reads_above_are_every_read_with_time_bounds():
    from rewards.settings import Settings
    from runtime.serve import embedded_app

    bounded = set()
    for path, operations in embedded_app(Settings()).openapi()["paths"].items():
        names = {p["name"] for p in operations.get("get", {}).get("parameters", []) if p["in"] == "query"}
        if names & {"from", "to", "from_date", "to_date", "dateFrom", "dateTo"}:
            bounded.add(path.removeprefix("/api/v1"))
    assert bounded == {read[0] for read in READS} | LIMITED_READS


@pytest.mark.parametrize("path,query,lower,upper", READS, ids=[read[0] for read in READS])
def test_every_read_clamps_far_bounds_to_all_time_and_refuses_the_rest_alike(paid, path, query, lower, upper):
    everything = paid.get(path, params=query)
    assert everything.status_code == 200, everything.text
    for name, far in [(upper, far) for far in FAR_FUTURE] + [(lower, far) for far in FAR_PAST]:
        response = paid.get(path, params={**query, name: far})
        if path == "/affiliate-portal/stats-breakdown":  # a window over 1,000 months is refused for its length alone
            assert response.status_code == 200 or "periods" in error_of(response, 400), (name, far)
            continue
        assert response.status_code == 200, (name, far, response.text)
        assert _without_clock(response.json()) == _without_clock(everything.json()), (name, far)
    for bad in ("soon", "1e999", "-1", "9" * 21, "2026-02-30", "10000-01-01"):
        for name in (lower, upper):
            assert error_of(paid.get(path, params={**query, name: bad}), 400) == f"{name} {BOUND_ERROR}", (name, bad)


# -- request lines past the server's limit: the contract's error body (rewards.web.protocol) -------------------------


def _raw(url: str, request_line: bytes, rest: bytes = b"") -> tuple[int, dict]:
    """Send a request as bytes (no client library would send these) and read the status and JSON body."""
    import json
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(request_line + b"\r\nHost: x\r\n" + rest + b"\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    assert b"content-type: application/json" in head.lower(), head
    return status, json.loads(body)


@pytest.mark.parametrize(
    "target",
    [
        "/api/v1/affiliates?" + "&".join(["regions[]=EU-region"] * 10_000),  # the client's bracket filter, ~180 KB
        "/api/v1/payouts/leaderboard/referred-volume?user_identifiers=" + ",".join([A] * 10_000),  # ~420 KB
        "/api/v1/referral_codes/status?user_identifier=" + "a" * 70_000,
    ],
    ids=["regions", "referred-volume", "one-long-value"],
)
def test_a_request_line_past_the_limit_is_a_414_in_the_contract_body(server, target):
    from rewards.web.protocol import MAX_REQUEST_LINE_BYTES, TOO_LONG

    assert len(target) > MAX_REQUEST_LINE_BYTES
    for url in set(server.urls.values()):
        status, body = _raw(url, b"GET " + target.encode() + b" HTTP/1.1")
        assert (status, body) == (414, {"statusCode": 414, "error": "Request-URI Too Long", "message": TOO_LONG})


def test_a_malformed_request_is_a_400_in_the_contract_body(server):
    for url in set(server.urls.values()):
        status, body = _raw(url, b"GET /api/v1/payouts/summary HTTP/1.1", b"bad header line without a colon\r\n")
        assert (status, body["statusCode"], body["message"]) == (400, 400, "malformed HTTP request")
    if server.shape == "embedded":  # one process: its /metrics counts every refusal (rewards.web.protocol.REFUSED)
        metrics = httpx.get(f"{server.url}/metrics", timeout=5).text
        assert 'rewards_http_refused_by_parser_total{status="400"}' in metrics


def test_a_request_line_within_the_limit_still_reaches_the_api(api):
    from rewards.web.protocol import MAX_REQUEST_LINE_BYTES

    identifiers = ",".join([A] * ((MAX_REQUEST_LINE_BYTES - 4096) // 43))  # httpx itself refuses 64 KiB queries
    response = api.get("/payouts/leaderboard/referred-volume", params={"user_identifiers": identifiers})
    assert response.status_code in (200, 400), response.text  # the API's own answer, whatever it is
    assert response.json()["statusCode" if response.status_code == 400 else "total_count"] is not None
