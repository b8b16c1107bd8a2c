"""Referral-code requests and the code record (API.md §2)."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rewards.domain.referrals import CodeRecord, code_figures_json
from rewards.domain.timestamps import format_timestamp
from rewards.web.fields import Integer

MaxUses = Annotated[Integer, Field(gt=0, le=2**31 - 1)] | None  # bounded: stored as a 64-bit integer, answered to JS
# A new limit may be 0: the code is disabled (the published client documents `updateReferralCode({max_uses: 0})`).
NewMaxUses = Annotated[Integer, Field(ge=0, le=2**31 - 1)] | None


class CreateCodes(BaseModel):
    model_config = ConfigDict(extra="ignore")
    user_identifier: str
    user_identifier_type: str
    quantity: Integer = 5
    max_uses: MaxUses = None

    @field_validator("quantity")
    @classmethod
    def _quantity_in_range(cls, quantity: int) -> int:
        if not 1 <= quantity <= 50:
            raise ValueError("must be between 1 and 50")
        return quantity


class UpdateCode(BaseModel):
    model_config = ConfigDict(extra="ignore")
    max_uses: NewMaxUses = Field(...)


class Signed(BaseModel):
    """The signature fields the published client sends with a use or a removal: stored with it, and checked when the
    project verifies signatures (rewards.domain.signatures)."""

    model_config = ConfigDict(extra="ignore")
    # Stored with the use and read back with the code: bounded (a signature is ~132 characters, a sign-in
    # message a few hundred). Both may come in the query string, which uvicorn caps at ~80 KiB with the
    # headers: at 4 UTF-8 bytes a character, percent-encoded, these two fit in ~61 KiB.
    signature: str | None = Field(None, max_length=1024)
    signature_message: str | None = Field(None, max_length=4096)
    chain_id: Integer | str | None = None

    def proof(self) -> dict:
        return self.model_dump(include={"signature", "signature_message", "chain_id"}, exclude_none=True)


class UseCode(Signed):
    user_identifier: str
    user_identifier_type: str


class RemoveReferral(Signed):
    """DELETE /referral_codes/{code}/referrals (API.md §7 `deleteReferral`): the user and referrer in the query string,
    the signature fields in the body."""

    user_identifier: str
    user_identifier_type: str
    referrer_identifier: str
    referrer_identifier_type: str


def code_json(record: CodeRecord, figures: dict | None = None) -> dict:
    """The code record (API.md §2) and its figures (`code_figures_json`; a new code's are zeros)."""
    return {
        "code": record.code,
        "created_at": format_timestamp(record.created_at_ms),
        "used_by": [
            {
                "identifier": u.identifier,
                "identifier_type": u.identifier_type,
                "used_at": format_timestamp(u.used_at_ms),
            }
            for u in record.used_by
        ],
        "max_uses": record.max_uses,
        "current_uses": record.current_uses,
        "uses": record.current_uses,
        "remaining_uses": record.remaining_uses,
        "available": record.available,
        **(figures or code_figures_json(record, {}, {})),
    }
