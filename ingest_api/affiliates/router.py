"""POST /affiliates (API.md §4): HTTP to ingest_api.affiliates.service (a user registered as an affiliate)."""

from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ingest_api.affiliates import service
from rewards.domain.affiliates import affiliate_json
from rewards.domain.payout_config import Label
from rewards.ports import Principal
from rewards.web.errors import bad_request, validation_messages
from rewards.web.http import LOG_UNAVAILABLE, backends_of, guard, json_body, parse_user, request_body_doc

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
    backends = backends_of(request)
    registered = await service.register(
        backends.state, backends.log, backends.figures, principal.project_id, user,
        **fields.model_dump(exclude={"user_identifier", "user_identifier_type"}),
    )  # fmt: skip
    body = affiliate_json(registered.affiliate, registered.config, registered.codes, registered.figures)
    return JSONResponse(body, status_code=201)
