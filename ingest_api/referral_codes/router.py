"""Referral codes (API.md §2): HTTP to the calls of ingest_api.referral_codes.service and back."""

from fastapi import APIRouter, Depends, Request

from ingest_api.referral_codes import service
from ingest_api.referral_codes.schemas import CreateCodes, RemoveReferral, UpdateCode, UseCode, code_json
from rewards.domain.referrals import json_number
from rewards.domain.timestamps import format_timestamp
from rewards.ports import Principal
from rewards.web.auth import guard
from rewards.web.backends import backends_of
from rewards.web.numbers import ExactJSONResponse
from rewards.web.openapi import LOG_UNAVAILABLE, request_body_doc
from rewards.web.requests import PageParams, parse_user, request_fields

router = APIRouter(prefix="/referral_codes", tags=["referral codes"])


@router.post(
    "",
    status_code=201,
    openapi_extra=request_body_doc(CreateCodes, required=False, query=True),
    responses=LOG_UNAVAILABLE,
)
async def create_codes(
    request: Request, principal: Principal = Depends(guard("service_role", "referral_codes_create"))
):
    fields: CreateCodes = await request_fields(request, CreateCodes)
    owner = parse_user(fields.user_identifier, fields.user_identifier_type)
    backends = backends_of(request)
    codes = await service.create_codes(
        backends.state, backends.log, principal.project_id, owner, fields.quantity, fields.max_uses
    )
    return ExactJSONResponse([code_json(r) for r in codes], status_code=201)


@router.get("", responses={404: {"description": "No referral codes found for this user"}})
async def list_codes(
    request: Request,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    page=PageParams,
    principal: Principal = Depends(guard("referral_codes:read")),
):
    owner = parse_user(user_identifier, user_identifier_type)
    backends = backends_of(request)
    records, count = await service.list_codes(backends.state, principal.project_id, owner, page.offset, page.size)
    figures = await _figures(backends, principal.project_id, records)
    results = [code_json(r, figures[r.code]) for r in records]
    return ExactJSONResponse({"results": results, "count": count, "next_page": page.next_page(count)})


async def _figures(backends, project_id: str, records) -> dict[str, dict]:
    return await service.figures_of(backends.traffic, backends.code_figures, project_id, records)


async def _code_answer(backends, project_id: str, record) -> ExactJSONResponse:
    return ExactJSONResponse(code_json(record, (await _figures(backends, project_id, [record]))[record.code]))


@router.get("/status")
async def referral_status(
    request: Request,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    principal: Principal = Depends(guard(None)),
):
    user = parse_user(user_identifier, user_identifier_type)
    referral = await service.referral_of(backends_of(request).state, principal.project_id, user)
    if referral is None:
        return {"referred": False}
    return {
        "referred": True,
        "code": referral.code,
        "referrer_identifier": referral.referrer.identifier,
        "referrer_identifier_type": referral.referrer.identifier_type,
        "referred_at": format_timestamp(referral.referred_at_ms),
    }


CODE_NOT_FOUND = {404: {"description": "Referral code not found"}}


@router.get("/{code}", responses=CODE_NOT_FOUND)
async def get_code(request: Request, code: str, principal: Principal = Depends(guard(None))):
    backends = backends_of(request)
    return await _code_answer(
        backends, principal.project_id, await service.get_code(backends.state, principal.project_id, code)
    )


@router.patch("/{code}", openapi_extra=request_body_doc(UpdateCode), responses=CODE_NOT_FOUND)
async def update_code(request: Request, code: str, principal: Principal = Depends(guard("service_role"))):
    fields: UpdateCode = await request_fields(request, UpdateCode, query=False)
    backends = backends_of(request)
    record = await service.set_max_uses(backends.state, principal.project_id, code, fields.max_uses)
    return await _code_answer(backends, principal.project_id, record)


USE_RESPONSES = {
    400: {"description": "The owner using their own code, or a use that would make a referral cycle"},
    **CODE_NOT_FOUND,
    409: {"description": "Conflict: the user is already referred"},
    422: {"description": "Unprocessable Entity: the code is unavailable (its max_uses is reached)"},
    **LOG_UNAVAILABLE,
}


@router.patch(
    "/{code}/use", openapi_extra=request_body_doc(UseCode, required=False, query=True), responses=USE_RESPONSES
)
async def use_code(request: Request, code: str, principal: Principal = Depends(guard(None))):
    fields: UseCode = await request_fields(request, UseCode)
    user = parse_user(fields.user_identifier, fields.user_identifier_type)
    backends = backends_of(request)
    record = await service.use_code(backends.state, backends.log, principal.project_id, code, user, fields.proof())
    return await _code_answer(backends, principal.project_id, record)


@router.delete(
    "/{code}/referrals",
    openapi_extra=request_body_doc(RemoveReferral, required=False, query=True),
    responses={404: {"description": "The user is not referred by that referrer through that code"}, **LOG_UNAVAILABLE},
)
async def remove_referral(request: Request, code: str, principal: Principal = Depends(guard("service_role"))):
    """API.md §7 `deleteReferral`: the user's referral is removed, so the user may be referred again; the code's uses
    and every payout made stay."""
    fields: RemoveReferral = await request_fields(request, RemoveReferral)
    user = parse_user(fields.user_identifier, fields.user_identifier_type)
    referrer = parse_user(fields.referrer_identifier, fields.referrer_identifier_type, field="referrer_identifier")
    backends = backends_of(request)
    removed = await service.remove_referral(
        backends.state, backends.log, principal.project_id, code, user, referrer, fields.proof()
    )
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


@user_router.get("/referrer")
async def user_referrer(
    request: Request,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    principal: Principal = Depends(guard(None)),
):
    """API.md §7 `getUserReferrer`: the user's level-1 referrer, with nulls when nobody referred the user."""
    user = parse_user(user_identifier, user_identifier_type)
    found = await service.referrer_of(backends_of(request).state, principal.project_id, user)
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
