"""The names the contract gives one meaning wherever they appear (API.md §0: a user's identifier and its type, a code,
a dedup id), documented once for every parameter and request body field so named: their values (an enum) and an
example. Swagger UI fills the examples in for "Try it out", so each is a value the service accepts.

Documentation only: the handlers validate as before (an unknown identifier type is a 400 naming it)."""

from rewards.domain.identifiers import IDENTIFIER_TYPES
from rewards.web.answers import ALICE, CHECK_ID, CODE, TX_HASH

CAROL = "0x000000000000000000000000000000000000ca01"
TYPES = {"enum": list(IDENTIFIER_TYPES), "example": "evm_address"}

VOCABULARY: dict[str, dict] = {
    "user_identifier": {"example": ALICE, "description": "The user's identifier, valid for its type (API.md §0)"},
    "user_identifier_type": {**TYPES, "description": "The user's identifier type (API.md §0)"},
    "identifier_type": {**TYPES, "description": "The identifier's type (API.md §0)"},
    "referrer_identifier": {"example": CAROL, "description": "The referrer's identifier"},
    "referrer_identifier_type": {**TYPES, "description": "The referrer's identifier type"},
    "user_identifiers": {"example": ALICE, "description": "Identifiers, comma-separated"},
    "user_address": {"example": ALICE},
    "code": {"example": CODE, "description": "A referral or affiliate code (matched case-insensitively)"},
    "dedup_id": {"example": "order-1042"},
    "event_name": {"example": "purchase"},
    "currency": {"example": "point"},
    "type": {"example": "point"},
    "group_by": {"example": "day"},
    "claim_check_ids": {"example": [CHECK_ID]},
    "hash": {"example": TX_HASH},
}


def document_vocabulary(operation: dict, schemas: dict) -> None:
    """Each parameter of `operation`, and each field of its JSON body, named in VOCABULARY gets its enum, its example
    and a description if it has none."""
    for parameter in operation.get("parameters", ()):
        known = VOCABULARY.get(parameter["name"])
        if known is not None:
            if "example" not in parameter and "examples" not in parameter:
                parameter["example"] = known["example"]
            if "description" in known:
                parameter.setdefault("description", known["description"])
            _with_enum(parameter["schema"], known)
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body is not None:
        _document_fields(body, schemas, set())


def _document_fields(schema: dict, schemas: dict, seen: set[str]) -> None:
    ref = schema.get("$ref")
    if ref is not None:
        name = ref.removeprefix("#/components/schemas/")
        if name not in seen:
            seen.add(name)
            _document_fields(schemas[name], schemas, seen)
        return
    for name, field in schema.get("properties", {}).items():
        known = VOCABULARY.get(name)
        if known is not None and "$ref" not in field:
            field.setdefault("examples", [known["example"]])
            _with_enum(field, known)
        _document_fields(field, schemas, seen)
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key, ()):
            _document_fields(option, schemas, seen)
    if isinstance(schema.get("items"), dict):
        _document_fields(schema["items"], schemas, seen)


def _with_enum(schema: dict, known: dict) -> None:
    """The enum on the schema's string (its string option, when it may be null too)."""
    if "enum" not in known:
        return
    strings = [option for option in schema.get("anyOf", ()) if option.get("type") == "string"] or [schema]
    for option in strings:
        option.setdefault("enum", known["enum"])
