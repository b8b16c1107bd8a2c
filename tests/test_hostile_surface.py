"""Issue 26's classes of hostile input to the published client's surface, on both shapes: JSON values of the wrong
type (a boolean, an array, an object, where a time, an amount, an integer or a text is expected), the time bounds of
every read, and request lines past the server's limit. (Replayed signatures: tests/test_signatures.py; codes named
like a route: tests/test_affiliates.py.)"""

import pytest

from tests.conftest import evm
from tests.test_auth import error_of

WRONG_TYPES = [True, False, [], {}, [1], {"a": 1}]
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


@pytest.mark.parametrize("value", WRONG_TYPES, ids=["true", "false", "empty-array", "empty-object", "array", "object"])
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
