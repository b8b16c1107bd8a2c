"""POST /payouts/pending-acceptance/accept (API.md §9): HTTP to ingest_api.acceptance.service."""

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ingest_api.acceptance import service
from rewards.web.answers import Answer, text
from rewards.web.dependencies import Caller, EventLogDep, StateDep, WarehouseDep
from rewards.web.errors import bad_request, validation_messages
from rewards.web.openapi import LOG_UNAVAILABLE, request_body_doc, success
from rewards.web.requests import json_body, parse_user

router = APIRouter(prefix="/payouts/pending-acceptance", tags=["payouts"])


class AcceptBody(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"recipient_address": "0x00000000000000000000000000000000000a11ce",
                 "message": "I accept my rewards of project 3f2c9d1e6b7a4c5d8e9f0a1b2c3d4e5f",
                 "signature": "0x" + "ab" * 65}
            ]
        },
    )  # fmt: skip

    recipient_address: str = Field(description="The user's EVM address (its checks are accepted)")
    signature: str = Field(min_length=1, max_length=1000, description="Its EIP-191 signature of `message`")
    message: str = Field(min_length=1, max_length=10_000, description="The text signed: it must name the project id")


class Accepted(Answer):
    accepted: int = text("The user's claim checks accepted by this call (open now, then claimable as usual)", 2)


@router.post(
    "/accept",
    openapi_extra=request_body_doc(AcceptBody),
    responses={**success(Accepted, "Accepted (0: nothing was pending)"), **LOG_UNAVAILABLE},
)
async def accept(request: Request, principal: Caller, state: StateDep, log: EventLogDep, warehouse: WarehouseDep):
    """Accept the user's token payouts waiting for it (API.md §9, `require_acceptance`): `signature` must be
    `recipient_address`'s EIP-191 signature of `message`, which must name the project id (else 400 `Invalid
    signature`). Example message: `I accept my rewards of project <project id>`."""
    try:
        body = AcceptBody.model_validate(json_body(await request.body()))
    except ValidationError as exc:
        raise bad_request(validation_messages(exc.errors())) from exc
    user = parse_user(body.recipient_address, "evm_address", "recipient_address")
    service.check_signed(principal.project_id, user, body.message, body.signature)
    return {"accepted": await service.accept(state, log, warehouse, principal.project_id, user)}
