"""Referral codes (API.md §2): HTTP to the calls of ingest_api.referral_codes.service and back."""

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from ingest_api.referral_codes import service
from ingest_api.referral_codes.schemas import CreateCodes, UpdateCode, UseCode, code_json
from rewards.domain.timestamps import format_timestamp
from rewards.ports import Principal
from rewards.web.http import (
    LOG_UNAVAILABLE,
    PageParams,
    backends_of,
    guard,
    parse_user,
    request_body_doc,
    request_fields,
)

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
    return JSONResponse([code_json(r) for r in codes], status_code=201)


@router.get("", responses={404: {"description": "No referral codes found for this user"}})
async def list_codes(
    request: Request,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    page=PageParams,
    principal: Principal = Depends(guard("referral_codes:read")),
):
    owner = parse_user(user_identifier, user_identifier_type)
    state = backends_of(request).state
    records, count = await service.list_codes(state, principal.project_id, owner, page.offset, page.size)
    return {"results": [code_json(r) for r in records], "count": count, "next_page": page.next_page(count)}


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
    return code_json(await service.get_code(backends_of(request).state, principal.project_id, code))


@router.patch("/{code}", openapi_extra=request_body_doc(UpdateCode), responses=CODE_NOT_FOUND)
async def update_code(request: Request, code: str, principal: Principal = Depends(guard("service_role"))):
    fields: UpdateCode = await request_fields(request, UpdateCode, query=False)
    record = await service.set_max_uses(backends_of(request).state, principal.project_id, code, fields.max_uses)
    return code_json(record)


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
    return code_json(record)
