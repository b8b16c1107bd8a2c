"""The body of PUT /projects/config (API.md §6): the payout configuration and the project's claim signer key (§7)."""

from pydantic import Field

from rewards.domain.payout_config import PayoutConfig

SIGNER_KEY, SIGNER_ADDRESS = "claim_signer_key", "claim_signer_address"
NO_SIGNER = object()  # the body does not name the signer: it stays as it is


class ConfigDocument(PayoutConfig):
    """The body of PUT /projects/config: the configuration, and the project's claim signer key (write-only)."""

    claim_signer_key: str | None = Field(
        None,
        pattern=r"^(0x)?[0-9a-fA-F]{64}$",
        json_schema_extra={"writeOnly": True},
        description="Write-only: the secp256k1 private key that signs claim checks (API.md §7), kept apart from the "
        "configuration and never answered (GET shows `claim_signer_address`). Absent: the signer stays as it is; "
        "null: removed. `claim_signer_address`, as GET answers it, is read-only and ignored here.",
    )
