"""Referral-code requests and the code record (API.md §2), and the answers (documented: rewards.web.answers)."""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rewards.domain.referrals import CodeRecord, code_figures_json
from rewards.domain.timestamps import format_timestamp
from rewards.web.answers import ALICE, BOB, CODE, Answer, CodeFigures, IdentifierType, exact_number, text, timestamp
from rewards.web.fields import Integer

MaxUses = Annotated[Integer, Field(gt=0, le=2**31 - 1)] | None  # bounded: stored as a 64-bit integer, answered to JS
# A new limit may be 0: the code is disabled (the published client documents `updateReferralCode({max_uses: 0})`).
NewMaxUses = Annotated[Integer, Field(ge=0, le=2**31 - 1)] | None


class CreateCodes(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [
                {"user_identifier": ALICE, "user_identifier_type": "evm_address", "quantity": 2, "max_uses": 10}
            ]
        },
    )
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
    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [{"max_uses": 20}]})
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
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"user_identifier": BOB, "user_identifier_type": "email"}]}
    )
    user_identifier: str
    user_identifier_type: str


class RemoveReferral(Signed):
    """DELETE /referral_codes/{code}/referrals (API.md §7 `deleteReferral`): the user and referrer in the query string,
    the signature fields in the body."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"user_identifier": BOB, "user_identifier_type": "email", "referrer_identifier": ALICE,
                 "referrer_identifier_type": "evm_address"}
            ]
        }
    )  # fmt: skip
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


# -- the answers ----------------------------------------------------------------------------------------------------


class CodeUseAnswer(Answer):
    identifier: str = text("The user who used the code", BOB)
    identifier_type: IdentifierType = text("Its identifier type", "email")
    used_at: str = timestamp("When")


class CodeRecordAnswer(CodeFigures):
    """A referral code (API.md §2) and its figures (§7)."""

    code: str = text("The code (generated codes: 7 characters of A-Z 0-9; affiliate codes: 3-32 of A-Z 0-9 _ -)", CODE)
    created_at: str = timestamp("When it was created")
    used_by: list[CodeUseAnswer] = Field(description="Every use, oldest first")
    max_uses: int | None = text("Its limit of uses; null: unlimited; 0: disabled", 10)
    current_uses: int = text("How many times it was used", 1)
    uses: int = text("`current_uses` again, for existing clients", 1)
    remaining_uses: int | None = text("Uses left; null: unlimited", 9)
    available: bool = text("Whether it can be used (false once max_uses is reached)", True)


class CodePage(Answer):
    results: list[CodeRecordAnswer] = Field(description="The user's codes, newest first")
    count: int = text("The user's codes in all", 2)
    next_page: int | None = text("The next page, null on the last", None)


class ReferralStatusAnswer(Answer):
    """Whether the user is referred; the other keys only when it is."""

    referred: bool = text("Whether the user is referred", True)
    code: str = text("The code it was referred through", CODE, default=None)
    referrer_identifier: str = text("Its referrer", ALICE, default=None)
    referrer_identifier_type: IdentifierType = text("Its referrer's identifier type", "evm_address", default=None)
    referred_at: str = timestamp("When it was referred", default=None)
    flagged: bool = text(
        "Whether the user is one of its referrers, at any level, by what the service can see (the same mailbox, a "
        "browser bound to both): those referrers earn nothing from it (API.md §8)",
        False,
        default=None,
    )


class ReferralRemovedAnswer(Answer):
    removed: Literal[True] = text("The referral is removed: the user may be referred again", True)
    code: str = text("The code it was through", CODE)
    user_identifier: str = text("The user", BOB)
    user_identifier_type: IdentifierType = text("Its identifier type", "email")
    referrer_identifier: str = text("Its former referrer", ALICE)
    referrer_identifier_type: IdentifierType = text("The referrer's identifier type", "evm_address")
    referred_at: str = timestamp("When the referral was made")


class UserReferrerAnswer(Answer):
    """The user's level-1 referrer; nulls (and `[]`) when nobody referred the user."""

    user_identifier: str = text("The user", BOB)
    user_identifier_type: IdentifierType = text("Its identifier type", "email")
    referrer_identifier: str | None = text("Its referrer", ALICE)
    referrer_identifier_type: IdentifierType | None = text("The referrer's identifier type", "evm_address")
    referrer_name: str | None = text("The referrer's name as an affiliate", "Alice")
    referrer_code: str | None = text("The referrer's first code", CODE)
    referrer_codes: list[str] = text("Every code of the referrer, oldest first", [CODE])
    referrer_user_rebate_rate: float | None = exact_number("The rebate rate of the code that referred the user", 0.1)
