"""POST /payouts/pending-approval/approve and /reject (API.md §9): HTTP to ingest_api.approvals.service."""

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ingest_api.approvals import service
from rewards.domain.approvals import APPROVED, MAX_DECISIONS, MAX_REASON_LENGTH, REJECTED
from rewards.domain.timestamps import now_ms
from rewards.web.answers import Answer, text
from rewards.web.dependencies import EventLogDep, ServiceCaller, StateDep
from rewards.web.errors import bad_request, validation_messages
from rewards.web.openapi import LOG_UNAVAILABLE, request_body_doc, success
from rewards.web.requests import json_body

router = APIRouter(prefix="/payouts/pending-approval", tags=["payouts"])


class DecisionBody(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"payout_ids": ["conversion:order-1042:0"], "reason": "checked the order"}]},
    )

    payout_ids: list[str] = Field(min_length=1, max_length=MAX_DECISIONS, description="The payouts held, by id")
    reason: str | None = Field(None, max_length=MAX_REASON_LENGTH, description="Why (kept with the decision)")


class Approved(Answer):
    approved: int = text("The payouts approved: paid now, as if their events had just been processed", 1)


class Rejected(Answer):
    rejected: int = text("The payouts rejected (`rejected_by_operator`)", 1)


CONFLICT = {409: {"description": "Conflict: a payout is not pending approval (named): nothing is decided"}}


@router.post(
    "/approve",
    openapi_extra=request_body_doc(DecisionBody),
    responses={**success(Approved, "Approved, all or none"), **CONFLICT, **LOG_UNAVAILABLE},
)
async def approve(request: Request, principal: ServiceCaller, state: StateDep, log: EventLogDep):
    """Approve payouts held for approval: each is paid as if its event had just been processed (caps, budgets and
    claim checks alike); each is decided once (a second decision is 409)."""
    body = await _body(request)
    count = await service.decide(state, log, principal.project_id, body.payout_ids, APPROVED, body.reason, now_ms())
    return {"approved": count}


@router.post(
    "/reject",
    openapi_extra=request_body_doc(DecisionBody),
    responses={**success(Rejected, "Rejected, all or none"), **CONFLICT, **LOG_UNAVAILABLE},
)
async def reject(request: Request, principal: ServiceCaller, state: StateDep, log: EventLogDep):
    """Reject payouts held for approval: each is refused (`rejected_by_operator`: movements show it); each is decided
    once (a second decision is 409)."""
    body = await _body(request)
    count = await service.decide(state, log, principal.project_id, body.payout_ids, REJECTED, body.reason, now_ms())
    return {"rejected": count}


async def _body(request: Request) -> DecisionBody:
    try:
        body = DecisionBody.model_validate(json_body(await request.body()))
    except ValidationError as exc:
        raise bad_request(validation_messages(exc.errors())) from exc
    if any(not 1 <= len(payout_id) <= 512 for payout_id in body.payout_ids):
        raise bad_request("payout_ids must each be 1 to 512 characters")
    return body
