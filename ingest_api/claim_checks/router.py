"""POST /claim-checks/close and /claim-checks/claims (API.md §5, §7): HTTP to ingest_api.claim_checks.service."""

from fastapi import APIRouter, Request

from ingest_api.claim_checks import service
from ingest_api.claim_checks.schemas import ClaimsRecorded, CloseChecks, RecordClaims
from rewards.domain.timestamps import now_ms
from rewards.web.answers import ClaimCheckAnswer, ClaimForm
from rewards.web.dependencies import EventLogDep, ServiceCaller, SettingsDep, StateDep
from rewards.web.openapi import LOG_UNAVAILABLE, request_body_doc, success
from rewards.web.requests import parse_user, request_fields

router = APIRouter(prefix="/claim-checks", tags=["claim checks"])

CHANGE_RESPONSES = {
    404: {"description": "A claim check is not found (or, when closing, is not the user's)"},
    409: {"description": "Conflict: a check is not in a state that allows the change"},
    **LOG_UNAVAILABLE,
}


CLOSE_RESPONSES = {
    **success(
        list[ClaimForm | ClaimCheckAnswer],
        "A signed claim form per listed check (a project without a claim signer: the checks, closed)",
    ),
    **CHANGE_RESPONSES,
    409: {"description": "Conflict: a check is claimed already"},
}  # fmt: skip


@router.post("/close", openapi_extra=request_body_doc(CloseChecks), responses=CLOSE_RESPONSES)
async def close_checks(
    request: Request, principal: ServiceCaller, state: StateDep, log: EventLogDep, settings: SettingsDep
):
    """Moves the user's open checks to `closed` (closing a closed check again is a no-op) and answers, for each listed
    check, the signed claim form an on-chain claim needs (the published client's `ClaimResponse`; docs/security.md,
    "Signed claim checks"), unsigned when no EVM contract can pay the check. A project without a claim signer gets the
    checks, as API.md §5 answers them."""
    fields: CloseChecks = await request_fields(request, CloseChecks)
    owner = parse_user(fields.user_identifier, fields.user_identifier_type)
    return await service.close_signed(
        state, log, principal.project_id, owner, fields.claim_check_ids, settings.secrets_keys, now_ms()
    )


@router.post(
    "/claims",
    openapi_extra=request_body_doc(RecordClaims),
    responses={**success(ClaimsRecorded, "The claims recorded"), **CHANGE_RESPONSES},
)
async def record_claims(request: Request, principal: ServiceCaller, state: StateDep, log: EventLogDep):
    """Closed checks become `claimed` by a transaction; the same hash and ids again is a no-op.
    `claimed` counts the listed checks now claimed by this hash, so a retry answers as the first call."""
    fields: RecordClaims = await request_fields(request, RecordClaims, query=False)
    claimed_ms = fields.claimed_at if fields.claimed_at is not None else now_ms()
    claimed = await service.record_claims(
        state, log, principal.project_id, fields.hash, claimed_ms, fields.claim_check_ids
    )
    return {"claimed": claimed}
