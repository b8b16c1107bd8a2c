"""POST /affiliates (API.md §4): registers a user as an affiliate, with the tier its commissions use.

The registration is published on the event log, so the listing (query API) learns of it."""

from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rewards.affiliates import affiliate_json, all_time_figures
from rewards.domain.payout_config import Label
from rewards.domain.timestamps import now_ms
from rewards.errors import ApiError, bad_request, validation_messages
from rewards.http import LOG_UNAVAILABLE, backends_of, guard, json_body, parse_user, request_body_doc
from rewards.ports import Affiliate, Principal

router = APIRouter(prefix="/affiliates", tags=["affiliates"])


class CreateAffiliate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_identifier: str
    user_identifier_type: str
    name: str | None = Field(None, max_length=256)
    status: Literal["active", "pending", "suspended"] = "active"
    region: Label | None = Field(None, max_length=64)
    audience: Label | None = Field(None, max_length=64)
    tax_status: Literal["verified", "pending", "exempt", "missing"] = "missing"
    tier: Label | None = Field(None, max_length=64)


@router.post(
    "",
    status_code=201,
    openapi_extra=request_body_doc(CreateAffiliate),
    responses={409: {"description": "Affiliate already exists: the user is registered"}, **LOG_UNAVAILABLE},
)
async def create_affiliate(request: Request, principal: Principal = Depends(guard("service_role"))):
    try:
        fields = CreateAffiliate.model_validate(json_body(await request.body()))
    except ValidationError as exc:
        raise bad_request(validation_messages(exc)) from exc
    user = parse_user(fields.user_identifier, fields.user_identifier_type)
    state = backends_of(request).state
    config = await state.get_config(principal.project_id)
    if fields.tier is not None and config.tier(fields.tier) is None:
        raise bad_request(f"tier {fields.tier!r} is not a tier of the project configuration")
    affiliate = Affiliate(
        id=user.identifier_type + ":" + user.identifier,
        user=user,
        name=fields.name,
        status=fields.status,
        region=fields.region,
        audience=fields.audience,
        tax_status=fields.tax_status,
        tier=fields.tier,
        created_at_ms=now_ms(),
    )
    backends = backends_of(request)
    async with state.create_affiliate(principal.project_id, affiliate) as created:
        if not created.value:
            raise ApiError(409, "Affiliate already exists")
        await backends.log.publish(principal.project_id, created.payload)
    codes = (await state.codes_of(principal.project_id, [user])).get(user, [])
    figures = await all_time_figures(backends.warehouse, principal.project_id, user)
    return JSONResponse(affiliate_json(affiliate, config, codes, figures), status_code=201)
