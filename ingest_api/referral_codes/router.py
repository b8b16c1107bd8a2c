"""Referral codes (API.md §2): HTTP to the calls of ingest_api.referral_codes.service and back."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from ingest_api.referral_codes import service
from ingest_api.referral_codes.schemas import (
    CodePage,
    CodeRecordAnswer,
    CreateCodes,
    ReferralRemovedAnswer,
    ReferralStatusAnswer,
    RemoveReferral,
    UpdateCode,
    UseCode,
    UserReferrerAnswer,
    code_json,
)
from rewards.domain.referrals import json_number
from rewards.domain.timestamps import format_timestamp
from rewards.ports import Principal
from rewards.web.auth import guard
from rewards.web.dependencies import Caller, CodeFiguresDep, CodeTrafficDep, EventLogDep, ServiceCaller, StateDep
from rewards.web.numbers import ExactJSONResponse
from rewards.web.openapi import LOG_UNAVAILABLE, request_body_doc, success
from rewards.web.requests import PageParams, parse_user, request_fields

router = APIRouter(prefix="/referral_codes", tags=["referral codes"])

CodesCreator = Annotated[Principal, Depends(guard("service_role", "referral_codes_create"))]
CodesReader = Annotated[Principal, Depends(guard("referral_codes:read"))]


@router.post(
    "",
    status_code=201,
    openapi_extra=request_body_doc(CreateCodes, required=False, query=True),
    responses={**success(list[CodeRecordAnswer], "Created: the new codes", 201), **LOG_UNAVAILABLE},
)
async def create_codes(request: Request, principal: CodesCreator, state: StateDep, log: EventLogDep):
    fields: CreateCodes = await request_fields(request, CreateCodes)
    owner = parse_user(fields.user_identifier, fields.user_identifier_type)
    codes = await service.create_codes(state, log, principal.project_id, owner, fields.quantity, fields.max_uses)
    return ExactJSONResponse([code_json(r) for r in codes], status_code=201)


@router.get(
    "",
    responses={
        **success(CodePage, "A page of the user's codes, newest first"),
        404: {"description": "No referral codes found for this user"},
    },
)
async def list_codes(
    principal: CodesReader,
    state: StateDep,
    traffic: CodeTrafficDep,
    figures: CodeFiguresDep,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    page=PageParams,
):
    owner = parse_user(user_identifier, user_identifier_type)
    records, count = await service.list_codes(state, principal.project_id, owner, page.offset, page.size)
    shown = await service.figures_of(traffic, figures, principal.project_id, records)
    results = [code_json(r, shown[r.code]) for r in records]
    return ExactJSONResponse({"results": results, "count": count, "next_page": page.next_page(count)})


async def _code_answer(traffic, figures, project_id: str, record) -> ExactJSONResponse:
    shown = await service.figures_of(traffic, figures, project_id, [record])
    return ExactJSONResponse(code_json(record, shown[record.code]))


@router.get("/status", responses=success(ReferralStatusAnswer, "Whether the user is referred, by whom"))
async def referral_status(
    principal: Caller, state: StateDep, user_identifier: str | None = None, user_identifier_type: str | None = None
):
    user = parse_user(user_identifier, user_identifier_type)
    referral = await service.referral_of(state, principal.project_id, user)
    if referral is None:
        return {"referred": False}
    return {
        "referred": True,
        "code": referral.code,
        "referrer_identifier": referral.referrer.identifier,
        "referrer_identifier_type": referral.referrer.identifier_type,
        "referred_at": format_timestamp(referral.referred_at_ms),
        "flagged": await service.self_referred(state, principal.project_id, user),
    }


CODE_NOT_FOUND = {404: {"description": "Referral code not found"}}
THE_CODE = success(CodeRecordAnswer, "The code")


@router.get("/{code}", responses={**THE_CODE, **CODE_NOT_FOUND})
async def get_code(principal: Caller, state: StateDep, traffic: CodeTrafficDep, figures: CodeFiguresDep, code: str):
    record = await service.get_code(state, principal.project_id, code)
    return await _code_answer(traffic, figures, principal.project_id, record)


@router.patch("/{code}", openapi_extra=request_body_doc(UpdateCode), responses={**THE_CODE, **CODE_NOT_FOUND})
async def update_code(
    request: Request,
    principal: ServiceCaller,
    state: StateDep,
    traffic: CodeTrafficDep,
    figures: CodeFiguresDep,
    code: str,
):
    fields: UpdateCode = await request_fields(request, UpdateCode, query=False)
    record = await service.set_max_uses(state, principal.project_id, code, fields.max_uses)
    return await _code_answer(traffic, figures, principal.project_id, record)


USE_RESPONSES = {
    **success(CodeRecordAnswer, "The code after the use"),
    400: {"description": "The owner using their own code, or a use that would make a referral cycle"},
    403: {"description": "User is blocklisted: the user or the code's owner (API.md §8)"},
    **CODE_NOT_FOUND,
    409: {"description": "Conflict: the user is already referred"},
    422: {"description": "Unprocessable Entity: the code is unavailable (its max_uses is reached)"},
    **LOG_UNAVAILABLE,
}


@router.patch(
    "/{code}/use", openapi_extra=request_body_doc(UseCode, required=False, query=True), responses=USE_RESPONSES
)
async def use_code(
    request: Request,
    principal: Caller,
    state: StateDep,
    log: EventLogDep,
    traffic: CodeTrafficDep,
    figures: CodeFiguresDep,
    code: str,
):
    fields: UseCode = await request_fields(request, UseCode)
    user = parse_user(fields.user_identifier, fields.user_identifier_type)
    record = await service.use_code(state, log, principal.project_id, code, user, fields.proof())
    return await _code_answer(traffic, figures, principal.project_id, record)


@router.delete(
    "/{code}/referrals",
    openapi_extra=request_body_doc(RemoveReferral, required=False, query=True),
    responses={
        **success(ReferralRemovedAnswer, "The referral removed"),
        404: {"description": "The user is not referred by that referrer through that code"},
        **LOG_UNAVAILABLE,
    },
)
async def remove_referral(request: Request, principal: ServiceCaller, state: StateDep, log: EventLogDep, code: str):
    """API.md §7 `deleteReferral`: the user's referral is removed, so the user may be referred again; the code's uses
    and every payout made stay."""
    fields: RemoveReferral = await request_fields(request, RemoveReferral)
    user = parse_user(fields.user_identifier, fields.user_identifier_type)
    referrer = parse_user(fields.referrer_identifier, fields.referrer_identifier_type, field="referrer_identifier")
    removed = await service.remove_referral(state, log, principal.project_id, code, user, referrer, fields.proof())
    return {
        "removed": True,
        "code": removed.code,
        "user_identifier": user.identifier,
        "user_identifier_type": user.identifier_type,
        "referrer_identifier": referrer.identifier,
        "referrer_identifier_type": referrer.identifier_type,
        "referred_at": format_timestamp(removed.referred_at_ms),
    }


user_router = APIRouter(prefix="/user", tags=["referral codes"])


@user_router.get("/referrer", responses=success(UserReferrerAnswer, "The user's level-1 referrer, or nulls"))
async def user_referrer(
    principal: Caller, state: StateDep, user_identifier: str | None = None, user_identifier_type: str | None = None
):
    """API.md §7 `getUserReferrer`: the user's level-1 referrer, with nulls when nobody referred the user."""
    user = parse_user(user_identifier, user_identifier_type)
    found = await service.referrer_of(state, principal.project_id, user)
    referral = found.referral
    return ExactJSONResponse(
        {
            "user_identifier": user.identifier,
            "user_identifier_type": user.identifier_type,
            "referrer_identifier": None if referral is None else referral.referrer.identifier,
            "referrer_identifier_type": None if referral is None else referral.referrer.identifier_type,
            "referrer_name": found.name,
            "referrer_code": found.codes[0] if found.codes else None,
            "referrer_codes": list(found.codes),
            "referrer_user_rebate_rate": None if found.rebate_rate is None else json_number(found.rebate_rate),
        }
    )
