"""The OpenAPI document (/openapi.json, /docs): valid, and saying what each operation really answers.

Every operation of /api/v1 is behind a bearer key (401; 404 for a deleted project) whose scope its security
requirement names, answers 400 rather than FastAPI's 422 for invalid input, and every error status carries the
contract's error body (API.md §0). The other statuses follow the contract, operation by operation (the tables below).
Every success answer has a schema and an example that schema holds (the fuzz, tests/web/test_fuzz.py, holds the real
answers to the schemas)."""

import json

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

from ingest_api.app import ROUTERS as INGEST_ROUTERS
from query_api.app import ROUTERS as QUERY_ROUTERS
from rewards.domain.identifiers import IDENTIFIER_TYPES
from rewards.settings import Settings
from rewards.web.answers import AffiliateAnswer, ClaimCheckAnswer
from rewards.web.errors import ErrorBody, error_body
from runtime.production import production_app
from runtime.serve import embedded_app
from schemas.entities import AFFILIATE, CLAIM_CHECK

EMBEDDED = embedded_app(Settings()).openapi()
WRITES = {
    ("post", "/events/batch"), ("post", "/events"), ("post", "/referral_codes"), ("patch", "/referral_codes/{code}"),
    ("patch", "/referral_codes/{code}/use"), ("put", "/projects/config"), ("post", "/affiliates"),
    ("post", "/claim-checks/close"), ("post", "/claim-checks/claims"), ("post", "/claim-checks/claim"),
    ("post", "/affiliates/{user_identifier}"), ("post", "/affiliates/{user_identifier}/rebate-rate"),
    ("put", "/projects/blocklist/{user_identifier}"), ("post", "/events/reversals"),
    ("post", "/payouts/pending-acceptance/accept"), ("post", "/payouts/pending-approval/approve"),
    ("post", "/payouts/pending-approval/reject"), ("post", "/webhooks"), ("patch", "/webhooks/{endpoint_id}"),
    ("post", "/dead-letters/replay"), ("post", "/users/erasures"),
}  # fmt: skip
SCOPED = {
    ("post", "/events/batch"), ("post", "/events"), ("post", "/referral_codes"), ("get", "/referral_codes"),
    ("patch", "/referral_codes/{code}"), ("get", "/projects/config"), ("put", "/projects/config"),
    ("post", "/affiliates"), ("get", "/affiliates"), ("post", "/claim-checks/close"),
    ("post", "/claim-checks/claims"), ("get", "/claim-checks/rewards-payouts"),
    ("post", "/affiliates/{user_identifier}"), ("post", "/affiliates/{user_identifier}/rebate-rate"),
    ("delete", "/referral_codes/{code}/referrals"), ("put", "/projects/blocklist/{user_identifier}"),
    ("delete", "/projects/blocklist/{user_identifier}"), ("get", "/projects/blocklist"), ("get", "/projects/budgets"),
    ("post", "/events/reversals"), ("post", "/payouts/pending-approval/approve"),
    ("post", "/payouts/pending-approval/reject"), ("get", "/payouts/pending-approval"), ("post", "/webhooks"),
    ("get", "/exports/payouts"), ("get", "/exports/conversions"), ("get", "/dead-letters"),
    ("post", "/dead-letters/replay"), ("get", "/webhooks"), ("get", "/webhooks/{endpoint_id}"),
    ("patch", "/webhooks/{endpoint_id}"),
    ("delete", "/webhooks/{endpoint_id}"), ("post", "/webhooks/{endpoint_id}/rotate-secret"),
    ("post", "/webhooks/{endpoint_id}/test"), ("get", "/webhooks/{endpoint_id}/deliveries"),
    ("post", "/webhooks/{endpoint_id}/deliveries/{delivery_id}/redeliver"), ("post", "/users/erasures"),
    ("get", "/users/erasures/{erasure_id}"),
}  # fmt: skip
# answered without a key, limited per client address (API.md §9)
PUBLIC = {("get", "/claimable-rewards")}
# 403 for what the rules refuse (API.md §8: a code use by or of a blocklisted user)
REFUSED = {("patch", "/referral_codes/{code}/use")}
LIMITED = {
    ("post", "/events/batch"), ("post", "/events"), ("get", "/payouts/summary"), ("post", "/referral_codes"),
    ("get", "/claim-checks/claim-history"), ("post", "/claim-checks/claim"), ("post", "/events/reversals"),
    ("get", "/exports/payouts"), ("get", "/exports/conversions"), ("post", "/dead-letters/replay"),
    ("post", "/users/erasures"),
}  # fmt: skip
# Answered as files (API.md §11's exports): text formats with an example each, Parquet as binary.
FILES = {
    "text/csv; charset=utf-8": "example", "application/x-ndjson": "example", "application/vnd.apache.parquet": None,
}  # fmt: skip
PUBLISHING = {
    ("post", "/events/batch"), ("post", "/events"), ("post", "/referral_codes"),
    ("patch", "/referral_codes/{code}/use"), ("post", "/affiliates"), ("post", "/claim-checks/close"),
    ("post", "/claim-checks/claims"), ("post", "/affiliates/{user_identifier}"),
    ("delete", "/referral_codes/{code}/referrals"), ("post", "/events/reversals"),
    ("post", "/payouts/pending-acceptance/accept"), ("post", "/payouts/pending-approval/approve"),
    ("post", "/payouts/pending-approval/reject"), ("post", "/dead-letters/replay"),
}  # fmt: skip
# 403 when the optional `project_id` names another project than the key's (the client sends it)
PROJECT_CHECKED = {("get", "/payouts"), ("get", "/payouts/movements")}
CONFLICTING = {
    ("post", "/events/batch"), ("post", "/events"), ("patch", "/referral_codes/{code}/use"), ("post", "/affiliates"),
    ("post", "/claim-checks/close"), ("post", "/claim-checks/claims"), ("post", "/claim-checks/claim"),
    ("post", "/affiliates/{user_identifier}"), ("put", "/projects/config"), ("post", "/events/reversals"),
    ("post", "/payouts/pending-approval/approve"), ("post", "/payouts/pending-approval/reject"), ("post", "/webhooks"),
}  # fmt: skip
OPERATIONS = sorted(
    (method, path.removeprefix("/api/v1"), operation)
    for path, methods in EMBEDDED["paths"].items()
    if path.startswith("/api/v1/")
    for method, operation in methods.items()
)


def documents() -> dict[str, dict]:
    settings = Settings()
    return {
        "embedded": EMBEDDED,
        "ingest": production_app("ingest", INGEST_ROUTERS, settings, publishes=True).openapi(),
        "query": production_app("query", QUERY_ROUTERS, settings, publishes=False).openapi(),
    }


@pytest.mark.parametrize("shape", ["embedded", "ingest", "query"])
def test_the_document_is_valid_openapi_with_every_reference_resolved(shape):
    document = documents()[shape]
    validate(document)
    text = json.dumps(document)
    assert "#/$defs/" not in text and '"$defs"' not in text
    schemas = document["components"]["schemas"]
    refs = {ref.split('"')[0] for ref in text.split('"$ref": "')[1:]}
    assert refs and all(ref.removeprefix("#/components/schemas/") in schemas for ref in refs), refs
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas


def test_every_operation_of_the_contract_is_documented():
    assert {(method, path) for method, path, _ in OPERATIONS} >= WRITES | SCOPED | LIMITED | PUBLISHING


# The scope each scoped operation needs (API.md §0: service_role is accepted wherever another scope is required).
SENDS = {("post", "/events/batch"), ("post", "/events"), ("post", "/events/reversals")}
READS_CODES = {("get", "/referral_codes")}


def test_bearer_auth_is_a_security_scheme_of_every_operation_with_the_scope_it_needs():
    scheme = EMBEDDED["components"]["securitySchemes"]["bearerAuth"]
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer"
    for method, path, operation in OPERATIONS:
        key = (method, path)
        if key in PUBLIC:
            assert operation["security"] == [] and "**No key**" in operation["description"], key
            continue
        if key in SENDS:
            scopes = ["SendTrackingEvent", "service_role"]
        elif key in READS_CODES:
            scopes = ["referral_codes:read", "service_role"]
        elif key in SCOPED:
            scopes = ["service_role"]
        else:
            scopes = []
        expected = [{"bearerAuth": [scope]} for scope in scopes] or [{"bearerAuth": []}]
        assert operation["security"] == expected, key
        note = f"a key with the `{scopes[0]}` scope" if scopes else "any key of the project"
        assert f"**Key:** {note}" in operation["description"], key
    assert "security" not in EMBEDDED["paths"]["/health"]["get"]


EVERY_OPERATION = sorted(
    (method, path, operation) for path, methods in EMBEDDED["paths"].items() for method, operation in methods.items()
)


def _success(operation: dict) -> tuple[str, dict]:
    (status,) = [status for status in operation["responses"] if status.startswith("2")]
    return status, operation["responses"][status]


@pytest.mark.parametrize(
    ("method", "path", "operation"), EVERY_OPERATION, ids=[f"{m} {p}" for m, p, _ in EVERY_OPERATION]
)
def test_each_operation_documents_its_answer_with_a_schema_and_an_example(method, path, operation):
    status, success = _success(operation)
    if path.startswith("/api/v1/exports/"):
        assert {name: "example" if "example" in media else None for name, media in success["content"].items()} == FILES
        return
    media = success["content"]["application/json"]
    assert media["schema"] not in ({}, {"type": "string"}), f"{status}: no schema of the answer"
    assert "example" in media, f"{status}: no example of the answer"
    assert success["description"] not in ("Successful Response", "")


def _validator(schema: dict) -> Draft202012Validator:
    return Draft202012Validator({**schema, "components": EMBEDDED["components"]})


@pytest.mark.parametrize(
    ("method", "path", "operation"), EVERY_OPERATION, ids=[f"{m} {p}" for m, p, _ in EVERY_OPERATION]
)
def test_each_documented_example_holds_to_its_own_schema(method, path, operation):
    _, success = _success(operation)
    for media in success["content"].values():
        if "example" in media:
            _validator(media["schema"]).validate(media["example"])
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body is not None:
        assert "example" in body, "no example of the body"
        _validator(body["schema"]).validate(body["example"])


def test_an_example_off_its_schema_is_caught():
    summary = EMBEDDED["paths"]["/api/v1/payouts/summary"]["get"]["responses"]["200"]["content"]["application/json"]
    assert not _validator(summary["schema"]).is_valid({"total_payouts": 15230.5})  # a number where a string goes
    assert not _validator(summary["schema"]).is_valid({})


def test_the_summary_can_be_tried_with_the_values_the_docs_fill_in():
    (currency,) = EMBEDDED["paths"]["/api/v1/payouts/summary"]["get"]["parameters"]
    assert currency["required"] and currency["example"] == "point"
    assert currency["schema"].get("enum", [currency["schema"].get("const")]) == ["point"]


def test_identifier_types_are_an_enum_wherever_they_are_named():
    named = 0
    for _, _, operation in OPERATIONS:
        for parameter in operation.get("parameters", ()):
            if parameter["name"] in ("user_identifier_type", "identifier_type", "referrer_identifier_type"):
                schema = parameter["schema"]
                strings = [o for o in schema.get("anyOf", [schema]) if o.get("type") == "string"]
                assert [o["enum"] for o in strings] == [list(IDENTIFIER_TYPES)], (parameter, operation["summary"])
                assert parameter["example"] in IDENTIFIER_TYPES
                named += 1
    assert named > 20


def test_the_shared_answers_name_the_fields_their_entities_declare():
    """A claim check and an affiliate are answered from their entities' declarations (schemas.entities)."""
    declared = [field.answer_name for field in CLAIM_CHECK.fields if field.answer_name is not None]
    assert set(ClaimCheckAnswer.model_fields) == set(declared)
    affiliate = {field.answer_name for field in AFFILIATE.fields if field.answer_name is not None}
    assert affiliate <= set(AffiliateAnswer.model_fields)


def test_amounts_written_as_json_numbers_say_they_are_exact_decimals():
    schemas = EMBEDDED["components"]["schemas"]
    numbers = [
        (name, field_name, field)
        for name, schema in schemas.items()
        for field_name, field in schema.get("properties", {}).items()
        if field.get("format") == "decimal"
    ]
    assert len(numbers) > 40
    for name, field_name, field in numbers:
        assert "exact decimal written as a JSON number" in field["description"], (name, field_name)


@pytest.mark.parametrize(("method", "path", "operation"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS])
def test_each_operation_documents_its_statuses_with_the_error_body(method, path, operation):
    key = (method, path)
    responses = operation["responses"]
    errors = {int(status) for status in responses if int(status) >= 400}
    expected = {429} if key in PUBLIC else {401, 404}
    expected |= {400} if operation.get("parameters") or key in WRITES else set()
    expected |= {414} if operation.get("parameters") else set()  # a request line past 64 KiB (rewards.web.protocol)
    expected |= {403} if key in SCOPED | PROJECT_CHECKED | REFUSED else set()
    expected |= {413, 415} if method in ("post", "put", "patch") else set()  # any body is checked, sent or not
    expected |= {429} if key in LIMITED else set()
    expected |= {503} if key in PUBLISHING else set()
    expected |= {409} if key in CONFLICTING else set()
    expected |= {422} if key == ("patch", "/referral_codes/{code}/use") else set()
    assert errors == expected
    for status in errors:
        content = responses[str(status)]["content"]["application/json"]
        assert content["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
        assert content["example"]["statusCode"] == status  # each status its own example, not the 400's
        assert responses[str(status)]["description"]
    if key in LIMITED | PUBLIC:
        assert responses["429"]["headers"]["Retry-After"]["required"] is True
        success = next(response for status, response in responses.items() if status.startswith("2"))
        assert {"X-RateLimit-Limit", "X-RateLimit-Remaining"} <= set(success["headers"])


@pytest.mark.parametrize(("method", "path"), sorted(WRITES))
def test_each_write_documents_its_json_body(method, path):
    body = EMBEDDED["paths"]["/api/v1" + path][method]["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    shapes = schema.get("anyOf", [schema])  # POST /events: a §3 event or a tracking event (API.md §7)
    assert all(shape.get("properties") or shape.get("$ref") for shape in shapes), schema
    optional = {("post", "/referral_codes"), ("patch", "/referral_codes/{code}/use"), ("post", "/claim-checks/claim"),
                ("put", "/projects/blocklist/{user_identifier}")}  # fmt: skip
    assert body["required"] is ((method, path) not in optional)


def test_fields_read_from_the_query_string_without_a_body_are_documented_there_too():
    for path, method, fields in [
        ("/api/v1/referral_codes", "post", {"user_identifier", "user_identifier_type", "quantity", "max_uses"}),
        ("/api/v1/referral_codes/{code}/use", "patch", {"user_identifier", "user_identifier_type"}),
    ]:
        parameters = EMBEDDED["paths"][path][method]["parameters"]
        query = {p["name"] for p in parameters if p["in"] == "query"}
        assert fields <= query
        schemas = [p["schema"] for p in parameters]
        assert all({"type": "null"} not in [s, *s.get("anyOf", [])] and s.get("type") != "null" for s in schemas)


@pytest.mark.parametrize("message", ["quantity must be between 1 and 50", ["events[3].dedup_id is required"]])
def test_the_error_body_schema_is_what_the_service_answers(message):
    assert ErrorBody.model_validate(error_body(400, message)).model_dump() == error_body(400, message)
    schema = EMBEDDED["components"]["schemas"]["ErrorBody"]
    assert set(schema["required"]) == {"statusCode", "error", "message"}
