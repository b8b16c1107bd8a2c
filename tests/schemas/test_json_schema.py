"""The published JSON Schema of `rewards.events` (schemas/json_schema.py, docs/schemas/rewards.events.schema.json) is
the record models', and the messages the production shape writes match it, every record type: the docs' consumer
example (docs/examples/consume_events.py) reads them from the real topic, checking each against the schema."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from schemas.json_schema import PUBLISHED, main, message_schema
from schemas.records import dump_records, load_records
from tests.conftest import event, evm
from tests.support.harness import Admin, Api, eventually

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "consume_events.py"
EVM = "evm_address"
ALICE, BOB, CAROL, DAVE = evm(1), evm(2), evm(3), evm(4)
USDC = {"address": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "chain_id": 1, "name": "USDC", "decimals": 6}
CONFIG = {
    "default_tier": None,
    "tiers": [],
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "end_user_reward": {"fixed": "10"}},
        {"event_name": "swap", "base": {"fixed": "6"}, "currency": USDC, "end_user_reward": {"rate": "1"}},
    ],
    "approval": {"currencies": ["point"], "above": "5"},
}
EVERY_TYPE = {"affiliate", "claim_check", "code_use", "codes_created", "conversion", "payout_decision",
              "referral_removed", "reversal", "tracking_event"}  # fmt: skip


def test_the_published_schema_is_the_record_models():
    assert main(["--check"]) == 0
    assert json.loads(PUBLISHED.read_text()) == message_schema()
    Draft202012Validator.check_schema(message_schema())
    records = [r["properties"]["type"]["const"] for r in message_schema()["$defs"].values()]
    assert set(records) == EVERY_TYPE


def test_a_record_that_breaks_the_contract_is_refused_and_unknown_fields_are_not():
    validator = Draft202012Validator(message_schema())
    purchase = {"type": "conversion", "project_id": "p", "batch_id": "b", "dedup_id": "d", "name": "purchase",
                "user_identifier": ALICE, "user_identifier_type": EVM, "timestamp_ms": 1, "received_ms": 1,
                "args": {}, "metadata": {}}  # fmt: skip
    assert json.loads(dump_records(load_records(json.dumps([purchase]).encode()))) == [purchase]
    validator.validate([purchase, {**purchase, "added_later": "a field a newer service writes"}])
    for broken in ({**purchase, "timestamp_ms": "yesterday"}, {**purchase, "type": "nope"},
                   {k: v for k, v in purchase.items() if k != "dedup_id"}):  # fmt: skip
        assert not validator.is_valid([broken]), broken


@pytest.fixture(scope="module")
def every_record(production_server) -> tuple[str, str]:
    """A project that wrote a record of every type on the topic."""
    admin = Admin(production_server)
    project = admin.project()
    with Api(production_server, admin.key(project, "service_role"), project) as api:
        assert api.put("/projects/config", json=CONFIG).status_code == 200
        code = api.post("/referral_codes", json={"user_identifier": BOB, "user_identifier_type": EVM, "quantity": 1})
        code = code.json()[0]["code"]
        assert api.patch(f"/referral_codes/{code}/use", json={"user_identifier": CAROL, "user_identifier_type": EVM})
        assert api.post("/affiliates", json={"user_identifier": ALICE, "user_identifier_type": EVM,
                                             "name": "Alice"}).status_code == 201  # fmt: skip
        page = {"name": "pageview", "metadata": {"tracking_id": "t-1", "page": "/"}}
        assert api.post("/events", json=page).status_code == 201
        purchase = {**event("p-1", CAROL), "args": {"value": {"amount": "12.5", "currency": {"name": "USD"}}}}
        assert api.post("/events/batch", json={"events": [purchase, event("s-1", DAVE, "swap")]}).status_code == 200
        held = eventually(lambda: _held(api))
        assert api.post("/payouts/pending-approval/approve", json={"payout_ids": held}).status_code == 200
        check = eventually(lambda: _open_check(api))
        closed = api.post("/claim-checks/close", json={"user_identifier": DAVE, "user_identifier_type": EVM,
                                                        "claim_check_ids": [check]})  # fmt: skip
        assert closed.status_code == 200, closed.text
        reversed_ = api.post("/events/reversals", json={"reversals": [{"dedup_id": "p-1", "reason": "refund"}]})
        assert reversed_.status_code == 200, reversed_.text
        removed = api.request("DELETE", f"/referral_codes/{code}/referrals",
                              json={"user_identifier": CAROL, "user_identifier_type": EVM,
                                    "referrer_identifier": BOB, "referrer_identifier_type": EVM})  # fmt: skip
        assert removed.status_code == 200, removed.text
    return production_server.env["KAFKA_BOOTSTRAP_SERVERS"], project


def _held(api: Api) -> list[str]:
    ids = [row["id"] for row in api.get("/payouts/pending-approval").json()["results"]]
    assert ids
    return ids


def _open_check(api: Api) -> str:
    listed = api.get("/claim-checks/rewards-payouts", params={"user_identifier": DAVE, "user_identifier_type": EVM})
    ids = [row["id"] for row in listed.json()["results"]]
    assert ids
    return ids[0]


def test_the_consumer_example_reads_every_record_type_and_each_matches_the_schema(every_record):
    bootstrap, project = every_record
    command = [sys.executable, str(EXAMPLE), "--bootstrap", bootstrap, "--project", project, "--idle-s", "3"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout)
    assert set(read["records"]) == EVERY_TYPE, read
    assert read["records"]["conversion"] == 2 and read["value"] == {"USD": "12.5"}
