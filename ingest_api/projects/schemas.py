"""The body of PUT /projects/config (API.md §6): the payout configuration and the project's claim signer key (§7); and
the configuration as GET and PUT answer it (documented)."""

from pydantic import ConfigDict, Field

from rewards.domain.payout_config import PayoutConfig
from rewards.web.answers import ALICE, USDC

SIGNER_KEY, SIGNER_ADDRESS = "claim_signer_key", "claim_signer_address"
NO_SIGNER = object()  # the body does not name the signer: it stays as it is

# The README's configuration (examples of the OpenAPI document).
EXAMPLE = {
    "default_tier": "base",
    "tiers": [
        {"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0.05", "r3": "0.02", "r4": "0.01"}},
        {"id": "gold", "name": "Gold", "rank": 2, "rates": {"r1": "0.2", "r2": "0.1", "r3": "0.05", "r4": "0.02"}},
    ],
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
         "end_user_reward": {"fixed": "10"}},
        {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"},
         "currency": {"address": USDC, "chain_id": 1, "name": "USDC", "decimals": 6}},
    ],
    "referral_reward": {"referrer": "50", "referred": "10"},
    "campaigns": [
        {"id": "launch", "event_names": ["purchase"], "starts_at": "2026-11-01T00:00:00.000Z",
         "ends_at": "2026-12-01T00:00:00.000Z", "bonus": "5"}
    ],
}  # fmt: skip


class ConfigDocument(PayoutConfig):
    """The body of PUT /projects/config: the configuration, and the project's claim signer key (write-only)."""

    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE]})

    claim_signer_key: str | None = Field(
        None,
        pattern=r"^(0x)?[0-9a-fA-F]{64}$",
        json_schema_extra={"writeOnly": True},
        description="Write-only: the secp256k1 private key that signs claim checks (API.md §7), kept apart from the "
        "configuration and never answered (GET shows `claim_signer_address`). Absent: the signer stays as it is; "
        "null: removed. `claim_signer_address`, as GET answers it, is read-only and ignored here.",
    )


SHOWN = "Shown"  # the answer's models, named apart from the body's (amounts and times are strings here)


def config_answer_schema() -> dict:
    """The configuration as answered (service.config_json): PayoutConfig as it writes itself to JSON (fields without a
    value left out), with the claim signer's address when the project has one."""
    schema = PayoutConfig.model_json_schema(mode="serialization", ref_template="#/$defs/{model}" + SHOWN)
    definitions = {name + SHOWN: definition for name, definition in schema.pop("$defs", {}).items()}
    schema["properties"][SIGNER_ADDRESS] = {
        "type": "string",
        "description": "The address of the project's claim signer (its key is never answered); absent without one",
        "examples": [ALICE],
    }
    schema["title"] = "PayoutConfig" + SHOWN
    schema["examples"] = [{**EXAMPLE, "verify_signatures": False, SIGNER_ADDRESS: ALICE}]
    definitions["PayoutConfig" + SHOWN] = schema
    return {"$ref": "#/$defs/PayoutConfig" + SHOWN, "$defs": definitions}
