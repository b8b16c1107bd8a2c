"""The bodies of the affiliate writes (API.md §4's registration; §7's affiliate-code writes of the published client)
and the answer of the code writes (built, and documented: rewards.web.answers)."""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ingest_api.affiliates import service
from rewards.domain.payout_config import Label
from rewards.domain.referrals import json_number
from rewards.domain.timestamps import format_timestamp
from rewards.web.answers import ALICE, CODE, Answer, IdentifierType, exact_number, text, timestamp
from rewards.web.fields import Integer


class CreateAffiliate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"user_identifier": ALICE, "user_identifier_type": "evm_address", "name": "Alice", "status": "active",
                 "region": "EU", "audience": "traders", "tax_status": "verified"}
            ]
        },
    )  # fmt: skip
    user_identifier: str
    user_identifier_type: str
    name: str | None = Field(None, max_length=256)
    status: Literal["active", "pending", "suspended"] = "active"
    region: Label | None = Field(None, max_length=64)
    audience: Label | None = Field(None, max_length=64)
    tax_status: Literal["verified", "pending", "exempt", "missing"] = "missing"
    tier: Label | None = Field(None, max_length=64)


ChainId = Annotated[Integer, Field(ge=0, le=2**63 - 1)] | None
Signature = Annotated[str, Field(max_length=1024)] | None


class Signed(BaseModel):
    """The signature fields of the client's affiliate writes: stored with the code, and checked when the project
    verifies signatures (rewards.domain.signatures)."""

    model_config = ConfigDict(extra="ignore")
    signature: Signature = None
    signature_public_key: Signature = None
    account_chain_id: ChainId = None

    def proof(self) -> dict:
        return self.model_dump(include={"signature", "signature_public_key", "account_chain_id"}, exclude_none=True)


class CreateAffiliateCode(Signed):
    """POST /affiliates as the published client sends it (`createAffiliateCode`): the user as `address` and
    `identifier_type`, the code chosen, its `name` (the client sends the code again), a rebate rate (0 to 1)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"address": ALICE, "identifier_type": "evm_address", "name": "ALICE_1", "code": "ALICE_1",
                 "signature": "0x" + "ab" * 65, "user_rebate_rate": 0.1}
            ]
        }
    )  # fmt: skip
    address: str
    identifier_type: str
    code: str
    name: str | None = Field(None, max_length=256)
    user_rebate_rate: Any = None  # a number from 0 to 1 (rewards.domain.referrals.parse_rebate_rate)


class UpdateAffiliateCode(Signed):
    """POST /affiliates/{user_identifier} (`updateAffiliateCode`): the new name of the user's affiliate code."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"code": "ALICE_2", "identifier_type": "evm_address"}]})
    code: str
    identifier_type: str
    user_identifier: str | None = None  # the path's, sent again by the client


class UpdateRebateRate(Signed):
    """POST /affiliates/{user_identifier}/rebate-rate (`updateRebateRate`): one of the user's codes' rebate rate."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"identifier_type": "evm_address", "code": "ALICE_1", "rebate_rate": 0.15}]}
    )
    identifier_type: str
    code: str = Field(max_length=64)  # any code of the user's, generated or chosen
    rebate_rate: Any = Field(...)  # a number from 0 to 1
    source_project_id: str | None = Field(None, max_length=256)  # the client's, for calls without a key: ignored


# Fields only the client's form has: a body naming one of them, and not `user_identifier`, is createAffiliateCode's.
CLIENT_FORM_FIELDS = frozenset({"address", "identifier_type", "code"})


def affiliate_code_json(made: service.AffiliateCode) -> dict:
    """The client's CreateAffiliateResponse: strings where it declares strings ("" for none)."""
    affiliate, code = made.affiliate, made.code
    return {
        "id": affiliate.id,
        "name": affiliate.name or "",
        "code": code.code,
        "user_identifier": affiliate.user.identifier,
        "user_identifier_type": affiliate.user.identifier_type,
        "region": affiliate.region or "",
        "updated_at": format_timestamp(made.updated_at_ms),
        "rebate_rate": None if code.rebate_rate is None else json_number(code.rebate_rate),
    }


class AffiliateCodeAnswer(Answer):
    """The client's CreateAffiliateResponse: the affiliate and its affiliate code."""

    id: str = text("The affiliate's id, `<identifier type>:<identifier>`", f"evm_address:{ALICE}")
    name: str = text("Its name (empty when unset)", "ALICE_1")
    code: str = text("Its affiliate code, in capitals", "ALICE_1")
    user_identifier: str = text("The affiliate", ALICE)
    user_identifier_type: IdentifierType = text("Its identifier type", "evm_address")
    region: str = text("Its region label (empty when unset)", "")
    updated_at: str = timestamp("The latest of its registration and the code's creation, rename or rate change")
    rebate_rate: float | None = exact_number("The code's rebate rate, 0 to 1; null unset", 0.1)


class RebateRateAnswer(Answer):
    code: str = text("The code", CODE)
    rebate_rate: float = exact_number("Its rebate rate, 0 to 1", 0.15)
