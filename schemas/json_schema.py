"""The JSON Schema of a message on `rewards.events`, for the topic's consumers: generated from the record models
(schemas.records, themselves from schemas/entities.py) and published as docs/schemas/rewards.events.schema.json.

`python -m schemas.json_schema` rewrites the published file; `--check` exits 1 when it differs from what the models
generate (tests/schemas/test_json_schema.py runs it, and checks real messages of both shapes against it).

A record may gain optional fields (schemas.records: a published contract), so a consumer's validator must accept
properties it does not know: the schema allows them (JSON Schema's default).
"""

import json
import sys
from pathlib import Path

from schemas.records import _records

PUBLISHED = Path(__file__).resolve().parents[1] / "docs" / "schemas" / "rewards.events.schema.json"
DRAFT = "https://json-schema.org/draft/2020-12/schema"  # the dialect's identifier (pydantic writes 2020-12)


def message_schema() -> dict:
    """A message: a JSON array of records, each an object whose `type` names its record (discriminator)."""
    generated = _records.json_schema(ref_template="#/$defs/{model}")
    for record in generated["$defs"].values():
        record["properties"]["type"].pop("default", None)  # every record written carries its type
        record["required"] = ["type", *record.get("required", [])]
    return {
        "$schema": DRAFT,
        "$id": "rewards.events.schema.json",
        "title": "A message on rewards.events",
        "description": (
            "One accepted batch or state change: a JSON array of records, written in a Kafka transaction (read with"
            " isolation.level=read_committed), keyed by project id. Amounts are decimal strings; times are epoch"
            " milliseconds (`*_ms`). Records may gain optional fields: accept properties you do not know."
        ),
        **generated,
    }


def published_text() -> str:
    return json.dumps(message_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        if not PUBLISHED.exists() or PUBLISHED.read_text() != published_text():
            print(f"{PUBLISHED} differs from the record models: run `python -m schemas.json_schema`", file=sys.stderr)
            return 1
        return 0
    PUBLISHED.parent.mkdir(parents=True, exist_ok=True)
    PUBLISHED.write_text(published_text())
    print(f"wrote {PUBLISHED}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
