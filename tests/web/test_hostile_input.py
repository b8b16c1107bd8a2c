"""Hostile input (API.md §3 "Limits"): the edge refuses what could not be processed, naming each problem;
what is accepted is processed; and one bad record never stops another project's events."""

import re
import time
from decimal import Decimal, localcontext
from urllib.parse import quote

import orjson
import pytest

from schemas.records import ConversionRecord
from tests.conftest import event, evm
from tests.ingest_api.test_referral_codes import create, user
from tests.query_api.test_payouts import CONFIG, purchase, refer
from tests.support.harness import eventually, metric_total, run_async
from tests.web.test_auth import error_of

EVM_USER = {"user_identifier_type": "evm_address"}


def batch(*events) -> dict:
    return {"events": list(events)}


def nested(depth: int) -> dict:
    """An object whose objects nest `depth` levels (itself included)."""
    value: dict = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def nested_json(depth: int) -> bytes:
    """The same as JSON text, for depths orjson refuses to write."""
    return b'{"a":' * (depth - 1) + b'{"leaf":1}' + b"}" * (depth - 1)


def status_of(api, dedup_id: str) -> str:
    return api.get("/events/status", params={"dedup_id": dedup_id}).json()["status"]


# -- amounts ---------------------------------------------------------------------------------------------

BAD_AMOUNTS = {
    "1e60": "plain",
    "1e999999": "plain",
    "1" * 100: "below 10^30",
    "1" + "0" * 30: "below 10^30",
    "-1": "plain",
    " 12 ": "plain",
    "1_000": "plain",
    "١٢": "plain",  # Arabic-Indic digits
    "12,5": "plain",
    "NaN": "plain",
    "Infinity": "plain",
    "0.0000000000000000001": "18 fractional digits",
    "": "plain",
    ".": "plain",
}


@pytest.mark.parametrize("arg", ["value", "revenue"])
def test_amounts_outside_the_limits_are_refused_naming_each(api, arg):
    events = [purchase(f"bad{i}", 1, amount) for i, amount in enumerate(BAD_AMOUNTS)]
    for sent in events:
        sent["args"] = {arg: sent["args"]["value"]}
    message = error_of(api.post("/events/batch", json=batch(*events)), 400)
    assert len(message) == len(BAD_AMOUNTS)
    for index, (line, expected) in enumerate(zip(message, BAD_AMOUNTS.values(), strict=True)):
        assert line.startswith(f"events[{index}].args.{arg}.amount must") and expected in line, line
    assert status_of(api, "bad0") == "not_found"


def test_amounts_as_json_numbers_and_on_the_single_event_endpoint(api):
    for body in (b'{"value": {"amount": 1e56}}', b'{"value": {"amount": 123456789012345678901234567890}}',
                 b'{"value": {"amount": -5}}', b'{"value": {"amount": true}}'):  # fmt: skip
        raw = orjson.dumps(event("num", name="purchase"))[:-1] + b',"args":' + body + b"}"
        response = api.post("/events", content=raw, headers={"Content-Type": "application/json"})
        assert "args.value.amount must" in error_of(response, 400)
    largest = "9" * 30 + "." + "9" * 18  # the largest amount within the limits
    accepted = [purchase("max", 1, largest), purchase("int", 1, 250), purchase("dot", 1, "12."), purchase("z", 1, "0")]
    assert api.post("/events/batch", json=batch(*accepted)).json() == {"ingested_events": 4}


# -- nesting ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["args", "metadata"])
def test_nesting_deeper_than_32_levels_is_refused(api, field):
    assert api.post("/events/batch", json=batch(event("deep32", **{field: nested(32)}))).status_code == 200
    for depth in (33, 200, 251, 252):
        message = error_of(api.post("/events/batch", json=batch(event(f"deep{depth}", **{field: nested(depth)}))), 400)
        assert message == f"events[0].{field} must not be nested deeper than 32 levels"
    single = api.post("/events", json=event("deep-single", **{field: nested(40)}))
    assert error_of(single, 400) == f"event.{field} must not be nested deeper than 32 levels"
    api.wait_processed("deep32")


@pytest.mark.parametrize("depth", [252, 600, 5000])
def test_bodies_nested_past_any_parser_limit_are_400(api, depth):
    headers = {"Content-Type": "application/json"}
    inner = b'{"name": "n", "dedup_id": "d", "user_identifier": "' + evm(1).encode() + b'", "args": '
    event_text = inner + b'{"user_identifier_type": "evm_address"}, "metadata": ' + nested_json(depth) + b"}"
    for path, body in (("/events/batch", b'{"events": [' + event_text + b"]}"), ("/events", event_text),
                       ("/events/batch", nested_json(depth)), ("/projects/config", nested_json(depth)),
                       ("/referral_codes", nested_json(depth)), ("/affiliates", nested_json(depth))):  # fmt: skip
        method = "PUT" if path == "/projects/config" else "POST"
        response = api.request(method, path, content=body, headers=headers)
        error_of(response, 400)


# -- timestamps ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "timestamp", ["0001-01-01T00:00:00Z", "1969-12-31T23:59:59.999Z", "2300-01-01T00:00:00Z", 10**17, -1, "9" * 30]
)
def test_event_times_outside_1970_to_2299_are_refused(api, timestamp):
    message = error_of(api.post("/events/batch", json=batch(event("t", timestamp=timestamp))), 400)
    assert message.startswith("events[0].timestamp must")


def test_event_times_at_the_edges_are_accepted_and_processed(api):
    edges = [event("t-min", timestamp=0), event("t-max", timestamp="2299-12-31T23:59:59.999Z")]
    assert api.post("/events/batch", json=batch(*edges)).json() == {"ingested_events": 2}
    api.wait_processed("t-min", "t-max")


def test_claimed_at_outside_the_limits_is_refused(api):
    for claimed_at in ("2300-01-01T00:00:00Z", 10**17, "0001-01-01T00:00:00Z"):
        body = {"hash": "0xabc", "claimed_at": claimed_at, "claim_check_ids": ["x"]}
        assert error_of(api.post("/claim-checks/claims", json=body), 400).startswith("claimed_at")


# -- configuration ---------------------------------------------------------------------------------------


def test_a_configuration_outside_the_limits_is_refused_naming_every_problem(api):
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    bad = {
        **CONFIG,
        "tiers": [{**CONFIG["tiers"][0], "rates": {"r1": "1.5", "r2": "1e-2", "r3": " 0.1", "r4": "0.01"}}],
        "conversions": [
            {"event_name": "purchase", "base": {"fixed": "1e100"}, "end_user_reward": {"rate": "1" + "0" * 50}},
            {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"},
             "currency": {"address": "0xa", "chain_id": 2**64, "name": "USDC", "decimals": 6}},
        ],
        "referral_reward": {"referrer": "1e70", "referred": "10"},
        "campaigns": [{"id": "c", "event_names": ["purchase"], "starts_at": "0001-01-01T00:00:00Z",
                       "ends_at": 10**17, "bonus": "5"}],
    }  # fmt: skip
    message = error_of(api.put("/projects/config", json=bad), 400)
    named = [line.split(" ")[0] for line in message]
    assert sorted(named) == sorted([
        "tiers[0].rates.r1", "tiers[0].rates.r2", "tiers[0].rates.r3", "conversions[0].base.fixed",
        "conversions[0].end_user_reward.rate", "conversions[1].currency.chain_id", "referral_reward.referrer",
        "campaigns[0].starts_at", "campaigns[0].ends_at",
    ]), message  # fmt: skip
    assert api.get("/projects/config").json()["conversions"][0]["base"] == {"rate_of": "value", "rate": "1"}


def test_an_empty_configuration_does_not_wipe_the_stored_one(api):
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    assert sorted(error_of(api.put("/projects/config", json={}), 400)) == [
        "default_tier is required",
        "tiers is required",
    ]
    assert api.get("/projects/config").json()["default_tier"] == "base"
    none = {"default_tier": None, "tiers": []}  # said explicitly: no affiliate tiers
    assert api.put("/projects/config", json=none).status_code == 200


# -- identifiers -----------------------------------------------------------------------------------------

BAD_IDENTIFIERS = [
    ("0x" + "a" * 40 + "\n", "evm_address"),
    ("a@b.co\n", "email"),
    ("a\tb@c.co", "email"),
    ("a\x00b@c.co", "email"),
    ("a\x7fb@c.co", "email"),
    (" 0x" + "a" * 40, "evm_address"),
]


def _user_operations(identifier: str, kind: str) -> list[tuple[str, str, dict]]:
    """Every operation that takes a user: (method, path, request keyword arguments)."""
    who = {"user_identifier": identifier, "user_identifier_type": kind}
    return [
        ("POST", "/events/batch", {"json": batch({**event("u1"), **who})}),
        ("POST", "/events", {"json": {**event("u2"), **who}}),
        ("POST", "/referral_codes", {"json": who}),
        ("GET", "/referral_codes", {"params": who}),
        ("GET", "/referral_codes/status", {"params": who}),
        ("GET", "/events/status", {"params": {**who, "event_name": "purchase"}}),
        ("GET", f"/payouts/totals/{quote(identifier, safe='')}", {"params": {"identifier_type": kind}}),
        ("GET", "/payouts/leaderboard/users", {"params": {"user_identifier": identifier, "identifier_type": kind}}),
        ("GET", "/payouts/leaderboard/payouts", {"params": {"user_identifier": identifier, "identifier_type": kind}}),
        ("GET", "/claim-checks/claim-history", {"params": who}),
        ("GET", "/claim-checks/totals", {"params": who}),
        ("GET", "/claim-checks/rewards-payouts", {"params": who}),
        ("POST", "/claim-checks/close", {"json": {**who, "claim_check_ids": ["x"]}}),
        ("POST", "/affiliates", {"json": who}),
    ]


@pytest.mark.parametrize(("identifier", "kind"), BAD_IDENTIFIERS)
def test_identifiers_with_a_trailing_newline_or_control_characters_are_refused_everywhere(api, identifier, kind):
    code = create(api, owner=user(1), quantity=1)[0]["code"]
    operations = [*_user_operations(identifier, kind),
                  ("PATCH", f"/referral_codes/{code}/use", {"json": {"user_identifier": identifier,
                                                                     "user_identifier_type": kind}})]  # fmt: skip
    for method, path, kwargs in operations:
        response = api.request(method, path, **kwargs)
        message = error_of(response, 400)
        assert f"not a valid {kind}" in str(message), (method, path, message)
    assert status_of(api, "u1") == "not_found" and status_of(api, "u2") == "not_found"


# -- exact totals ----------------------------------------------------------------------------------------

HUGE = "123456789012345678901234567.123456789012345678"  # 45 significant digits
TINY = "0.000000000000000001"


def test_totals_are_exact_sums_of_their_parts(api):
    config = {
        **CONFIG,
        "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"},
                         "end_user_reward": {"rate": "1"}}],
        "campaigns": [{"id": "c", "event_names": ["purchase"], "starts_at": "2026-01-01T00:00:00Z",
                       "ends_at": "2027-01-01T00:00:00Z", "bonus": TINY}],
    }  # fmt: skip
    assert api.put("/projects/config", json=config).status_code == 200
    refer(api, 1, 2)
    sent = purchase("exact", 2, HUGE, timestamp="2026-06-01T00:00:00Z")
    assert api.post("/events/batch", json=batch(sent)).json() == {"ingested_events": 1}
    api.wait_processed("exact")

    totals = api.get(f"/payouts/totals/{evm(2)}", params={"identifier_type": "evm_address"}).json()
    assert totals["by_kind"]["end_user_reward"] == HUGE and totals["by_kind"]["campaign_bonus"] == TINY
    with localcontext(prec=100):  # the test's own sums exact too (the default context keeps 28 digits)
        parts = sum(Decimal(v) for v in totals["by_kind"].values())
        assert Decimal(totals["total_points"]) == parts == Decimal(HUGE) + Decimal(TINY) + 10  # + referral reward
    assert totals["total_points"] == "123456789012345678901234577.123456789012345679"

    assert api.post("/affiliates", json=user(1)).status_code == 201
    [affiliate] = eventually(lambda: _listed_with_volume(api))
    assert affiliate["r1_volume"] == HUGE and affiliate["total_volume"] == HUGE
    assert (
        affiliate["total_earnings"] == "12345678901234567890123506.712345678901234567"
    )  # 10% of HUGE (18 places) + 50


def _listed_with_volume(api) -> list[dict]:
    results = api.get("/affiliates", params={"dateRange": "all"}).json()["results"]
    assert results and results[0]["r1_volume"] != "0"
    return results


# -- pages and windows at the edges -------------------------------------------------------------------


def test_a_page_past_the_end_of_nothing_is_an_empty_page(api):
    body = api.get("/affiliates", params={"regions": "nowhere", "page": 2}).json()
    assert body == {"results": [], "page": 2, "per_page": 25, "total_count": 0, "total_pages": 0}


HUGE_PAGES = [{"page": 9223372036854775808}, {"page": 1152921504606846977, "page_size": 16}, {"page": 2**31},
              {"page": 10**400}]  # fmt: skip


@pytest.mark.parametrize("params", HUGE_PAGES)
def test_pages_beyond_the_largest_are_refused_not_wrapped(api, params):
    who = {"user_identifier": evm(1), **EVM_USER}
    create(api, owner=user(1), quantity=1)
    for path, extra in (("/referral_codes", who), ("/payouts/leaderboard/users", {}),
                        ("/payouts/leaderboard/payouts", {}), ("/claim-checks/rewards-payouts", {}),
                        ("/claim-checks/claim-history", who)):  # fmt: skip
        assert "page must not be greater than 2147483647" in str(
            error_of(api.get(path, params={**params, **extra}), 400)
        )
    error_of(api.get("/affiliates", params={"page": params["page"]}), 400)


def test_the_largest_page_answers_empty(api):
    who = {"user_identifier": evm(1), **EVM_USER}
    create(api, owner=user(1), quantity=1)
    assert api.get("/referral_codes", params={**who, "page": 2**31 - 1}).json()["results"] == []
    board = api.get("/payouts/leaderboard/users", params={"page": 2**31 - 1, "page_size": 100}).json()
    assert board["results"] == [] and board["page"] == 2**31 - 1


@pytest.mark.parametrize(
    "params",
    [{"dateFrom": "0001-01-01", "dateTo": "9999-12-31"}, {"dateFrom": "2400-01-01"}, {"dateTo": "1800-01-01"},
     {"dateFrom": "99999999999999999999"}],
)  # fmt: skip
def test_affiliate_windows_beyond_the_stored_span_answer(api, params):
    assert api.get("/affiliates", params=params).status_code in (200, 400)
    assert api.get("/affiliates", params={**params, "sort_by": "total_volume"}).status_code in (200, 400)


@pytest.mark.parametrize("bound", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "99999999999999999999", "-5"])
def test_time_filters_beyond_the_stored_span_are_clamped(api, bound):
    for path in ("/payouts/leaderboard/users", "/claim-checks/rewards-payouts"):
        for name in ("from", "to"):
            response = api.get(path, params={name: bound})
            assert response.status_code in (200, 400), response.text
            if response.status_code == 400:
                assert name in response.json()["message"]


# -- one bad record never stops the others -------------------------------------------------------------

OVERFLOWING = "9" * 30  # within the limits; rate × amount is ~10^60, past the payout limit (10^48)


def test_an_event_whose_payout_cannot_be_stored_stops_nobody(server, make_api, admin):
    hostile, other = make_api("service_role"), make_api("service_role", project_id=admin.project())
    config = {**CONFIG, "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": OVERFLOWING},
                                         "end_user_reward": {"fixed": "1"}}]}  # fmt: skip
    for api in (hostile, other):
        assert api.put("/projects/config", json=config).status_code == 200
    before = _dead_letters(server)
    assert hostile.post("/events/batch", json=batch(purchase("overflow", 1, OVERFLOWING))).status_code == 200
    assert hostile.post("/events/batch", json=batch(purchase("after", 1, "0"))).status_code == 200
    assert other.post("/events/batch", json=batch(purchase("ordinary", 2, "2"))).status_code == 200

    other.wait_processed("ordinary")
    hostile.wait_processed("after")
    assert other.get("/payouts/summary", params={"currency": "point"}).json() == {"total_payouts": "1"}
    assert hostile.get("/payouts/summary", params={"currency": "point"}).json() == {"total_payouts": "1"}
    assert status_of(hostile, "overflow") == "failed"  # set aside: never paid
    eventually(lambda: _dead_letters_above(server, before))
    if server.shape == "production":  # also on the dead-letter topic, with the reason
        [dead] = run_async(_dead_letter_topic(server, hostile.project_id))
        assert (dead["record_type"], dead["source_id"]) == ("conversion", "overflow")
        assert "payout limit" in dead["reason"] and orjson.loads(dead["payload"])["dedup_id"] == "overflow"


def test_a_message_that_cannot_be_read_stops_nobody(server, make_api):
    """What no edge check can prevent (a message written to the log by other means, or corrupted)."""
    api = make_api("service_role")
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    before = _dead_letters(server)
    record = ConversionRecord(
        project_id=api.project_id,
        batch_id="b",
        dedup_id="raw",
        name="purchase",
        user_identifier=evm(3),
        user_identifier_type="evm_address",
        timestamp_ms=0,
        received_ms=0,
    )
    deep = orjson.dumps([record.model_dump(exclude={"args"})])[:-2] + b',"args":' + nested_json(300) + b"}]"
    for payload in (b"[[[", b'{"not": "records"}', b'[{"type": "conversion"}]', deep):
        run_async(_publish_raw(server, api.project_id, payload))
    assert api.post("/events/batch", json=batch(purchase("behind", 3, "5"))).status_code == 200
    api.wait_processed("behind")
    assert (
        api.get(f"/payouts/totals/{evm(3)}", params=EVM_USER | {"identifier_type": "evm_address"}).json()["by_kind"][
            "end_user_reward"
        ]
        == "10"
    )
    eventually(lambda: _dead_letters_above(server, before, by=4))


async def _publish_raw(server, project_id: str, payload: bytes) -> None:
    if server.shape == "embedded":
        from rewards.adapters.embedded.sqlite_db import SqliteDatabase
        from rewards.adapters.embedded.sqlite_outbox import SqliteOutbox
        from runtime.wiring import state_path

        db = SqliteDatabase(state_path(server.data_dir))
        try:
            await SqliteOutbox(db).publish(project_id, payload)
        finally:
            await db.close()
        return
    from aiokafka import AIOKafkaProducer

    from schemas.topics import EVENTS_TOPIC, partition_key

    producer = AIOKafkaProducer(bootstrap_servers=server.env["KAFKA_BOOTSTRAP_SERVERS"])
    await producer.start()
    try:
        await producer.send_and_wait(EVENTS_TOPIC, payload, key=partition_key(project_id))
    finally:
        await producer.stop()


async def _dead_letter_topic(server, project_id: str, timeout_s: float = 10) -> list[dict]:
    """The project's dead letters on the topic (read from the start until some appear, or the timeout)."""
    from aiokafka import AIOKafkaConsumer

    from schemas.topics import DLQ_TOPIC

    consumer = AIOKafkaConsumer(
        DLQ_TOPIC, bootstrap_servers=server.env["KAFKA_BOOTSTRAP_SERVERS"], auto_offset_reset="earliest"
    )
    await consumer.start()
    found: list[dict] = []
    try:
        deadline = time.monotonic() + timeout_s
        while not found and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            rows = [orjson.loads(message.value) for messages in batches.values() for message in messages]
            found += [row for row in rows if row["project_id"] == project_id]
        return found
    finally:
        await consumer.stop()


DEAD_LETTERS = re.compile(r"^rewards_worker_dead_letters_total\{.*\} (\S+)$", re.MULTILINE)


def _dead_letters(server) -> float:
    """Summed over the processes that write deliveries (the production shape's worker processes share them)."""
    urls = [server.url] if server.shape == "embedded" else server.worker_metrics_urls
    return metric_total(urls, DEAD_LETTERS)


def _dead_letters_above(server, before: float, by: int = 1) -> None:
    assert _dead_letters(server) >= before + by


# -- sizes within the limits -----------------------------------------------------------------------------------


def test_a_full_batch_of_incompressible_events_within_the_limits_is_accepted_and_processed(api):
    """100 events of nearly 16 KiB each: 1.5 MB, under the 2 MiB body limit, and as large once compressed. The
    production shape published it as one Kafka message over the broker's 1 MB default: 503 (retry later) forever."""
    import base64
    import random

    rng = random.Random(10)
    blobs = [base64.b64encode(rng.randbytes(11_500)).decode() for _ in range(100)]  # 15,336 characters each
    events = [event(f"big{n}", metadata={"blob": blob}) for n, blob in enumerate(blobs)]
    assert max(len(orjson.dumps(e)) for e in events) < 16 * 1024
    response = api.post("/events/batch", json=batch(*events))
    assert response.status_code == 200, response.text
    assert response.json() == {"ingested_events": 100}
    api.wait_processed(*(e["dedup_id"] for e in events), timeout_s=30)


@pytest.mark.parametrize("field", ["signature", "signature_message"])
def test_a_code_use_proof_is_bounded(api, field):
    """The proof is stored with the use and read back with each read of the code (up to 1,000 uses a read in the
    production shape): unbounded, 1 MB per use makes every read of a popular code a gigabyte."""
    code = create(api, owner=user(1), quantity=1)[0]["code"]
    response = api.patch(f"/referral_codes/{code}/use", json={**user(2), field: "0x" + "ab" * 500_000})
    assert field in str(error_of(response, 400))
    assert api.get(f"/referral_codes/{code}").json()["current_uses"] == 0
