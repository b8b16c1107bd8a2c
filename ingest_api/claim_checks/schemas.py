"""The bodies of the claim check changes (API.md §5, §7): closing a user's checks, recording their claims; and the
answer of the claims (documented: rewards.web.answers)."""

from typing import Annotated

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from rewards.domain.timestamps import InvalidTimestamp, parse_time_ms
from rewards.web.answers import ALICE, CHECK_ID, TIME, TX_HASH, Answer, text

MAX_IDS = 1000
CheckIds = Annotated[list[Annotated[str, Field(min_length=1, max_length=64)]], Field(min_length=1, max_length=MAX_IDS)]


class CloseChecks(BaseModel):
    """The user may come in camelCase (the published client's `closeClaimChecks` sends `userIdentifier`)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"user_identifier": ALICE, "user_identifier_type": "evm_address", "claim_check_ids": [CHECK_ID]}
            ]
        },
    )
    user_identifier: str = Field(validation_alias=AliasChoices("user_identifier", "userIdentifier"))
    user_identifier_type: str = Field(validation_alias=AliasChoices("user_identifier_type", "userIdentifierType"))
    claim_check_ids: CheckIds


class RecordClaims(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"hash": TX_HASH, "claimed_at": TIME, "claim_check_ids": [CHECK_ID]}]},
    )
    hash: str = Field(min_length=1, max_length=256)
    claimed_at: int | str | None = None
    claim_check_ids: CheckIds

    @field_validator("claimed_at", mode="before")  # the value as sent: lax mode would make `true` the time 1
    @classmethod
    def _timestamp(cls, value: object) -> int | None:
        try:
            return None if value is None else parse_time_ms(value)
        except InvalidTimestamp as exc:
            raise ValueError(str(exc)) from exc


class ClaimsRecorded(Answer):
    claimed: int = text("The listed checks now claimed by this hash (a retry answers as the first call)", 1)
