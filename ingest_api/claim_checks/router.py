"""POST /claim-checks/close and /claim-checks/claims (API.md §5, §7): HTTP to ingest_api.claim_checks.service."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from ingest_api.claim_checks import service
from rewards.domain.timestamps import InvalidTimestamp, now_ms, parse_time_ms
from rewards.ports import Principal
from rewards.web.auth import guard
from rewards.web.backends import backends_of
from rewards.web.openapi import LOG_UNAVAILABLE, request_body_doc
from rewards.web.requests import parse_user, request_fields

router = APIRouter(prefix="/claim-checks", tags=["claim checks"])

MAX_IDS = 1000
CheckIds = Annotated[list[Annotated[str, Field(min_length=1, max_length=64)]], Field(min_length=1, max_length=MAX_IDS)]


class CloseChecks(BaseModel):
    """The user may come in camelCase (the published client's `closeClaimChecks` sends `userIdentifier`)."""

    model_config = ConfigDict(extra="forbid")
    user_identifier: str = Field(validation_alias=AliasChoices("user_identifier", "userIdentifier"))
    user_identifier_type: str = Field(validation_alias=AliasChoices("user_identifier_type", "userIdentifierType"))
    claim_check_ids: CheckIds


class RecordClaims(BaseModel):
    model_config = ConfigDict(extra="forbid")
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


CHANGE_RESPONSES = {
    404: {"description": "A claim check is not found (or, when closing, is not the user's)"},
    409: {"description": "Conflict: a check is not in a state that allows the change"},
    **LOG_UNAVAILABLE,
}


CLOSE_RESPONSES = {
    **CHANGE_RESPONSES,
    409: {"description": "Conflict: the project has no claim signer (`claim signer not configured`), or a check is "
                         "claimed already"},
}  # fmt: skip


@router.post("/close", openapi_extra=request_body_doc(CloseChecks), responses=CLOSE_RESPONSES)
async def close_checks(request: Request, principal: Principal = Depends(guard("service_role"))):
    """Moves the user's open checks to `closed` (closing a closed check again is a no-op) and answers, for each listed
    check, the signed claim form an on-chain claim needs (the published client's `ClaimResponse`; README "Signed claim
    checks"), unsigned when no EVM contract can pay the check. A project without a claim signer gets the checks, as
    API.md §5 answers them."""
    fields: CloseChecks = await request_fields(request, CloseChecks)
    owner = parse_user(fields.user_identifier, fields.user_identifier_type)
    backends = backends_of(request)
    return await service.close_signed(
        backends.state, backends.log, principal.project_id, owner, fields.claim_check_ids,
        backends.settings.secrets_keys, now_ms(),
    )  # fmt: skip


@router.post("/claims", openapi_extra=request_body_doc(RecordClaims), responses=CHANGE_RESPONSES)
async def record_claims(request: Request, principal: Principal = Depends(guard("service_role"))):
    """Closed checks become `claimed` by a transaction; the same hash and ids again is a no-op.
    `claimed` counts the listed checks now claimed by this hash, so a retry answers as the first call."""
    fields: RecordClaims = await request_fields(request, RecordClaims, query=False)
    claimed_ms = fields.claimed_at if fields.claimed_at is not None else now_ms()
    backends = backends_of(request)
    claimed = await service.record_claims(
        backends.state, backends.log, principal.project_id, fields.hash, claimed_ms, fields.claim_check_ids
    )
    return {"claimed": claimed}
