"""POST /affiliates (API.md §4): registers a user as an affiliate, with the tier its commissions use.

The listing (GET /affiliates) and the volume figures come with the affiliates read model.
"""

from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rewards.domain.amounts import format_amount
from rewards.domain.timestamps import format_timestamp, now_ms
from rewards.errors import ApiError, bad_request, validation_messages
from rewards.http import backends_of, guard, json_body, parse_user
from rewards.ports import Affiliate, Principal

router = APIRouter(prefix="/affiliates", tags=["affiliates"])


class CreateAffiliate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_identifier: str
    user_identifier_type: str
    name: str | None = Field(None, max_length=256)
    status: Literal["active", "pending", "suspended"] = "active"
    region: str | None = Field(None, max_length=64)
    audience: str | None = Field(None, max_length=64)
    tax_status: Literal["verified", "pending", "exempt", "missing"] = "missing"
    tier: str | None = Field(None, max_length=64)


@router.post("", status_code=201)
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
    if not await state.create_affiliate(principal.project_id, affiliate):
        raise ApiError(409, "Affiliate already exists")
    codes, _ = await state.list_codes(principal.project_id, user, 0, 100)
    tier = config.effective_tier(affiliate.tier)
    rates = {f"r{n}": float(tier.rates.at_level(n)) if tier else 0.0 for n in range(1, 5)}
    zero = format_amount(0)
    body = {
        "id": affiliate.id,
        "user_identifier": user.identifier,
        "user_identifier_type": user.identifier_type,
        "name": affiliate.name,
        "status": affiliate.status,
        "region": affiliate.region,
        "audience": affiliate.audience,
        "tax_status": affiliate.tax_status,
        "tier": None if tier is None else {"id": tier.id, "name": tier.name, "rank": tier.rank},
        "created_at": format_timestamp(affiliate.created_at_ms),
        "codes": [c.code for c in codes],
        "referred_users": 0,
        "total_volume": zero,
        **{f"r{n}_volume": zero for n in range(1, 5)},
        "total_earnings": zero,
        **rates,
    }
    return JSONResponse(body, status_code=201)
