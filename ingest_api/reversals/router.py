"""POST /events/reversals (API.md §9): HTTP to ingest_api.reversals.service."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from ingest_api.reversals import service
from ingest_api.reversals.schemas import InvalidReversals, ReversalsApplied, ReversalsIn, read_reversals
from rewards.domain.reversals import MAX_PER_EVENT, PastWhole, TooMany
from rewards.domain.timestamps import now_ms
from rewards.ports import Principal
from rewards.web.auth import guard
from rewards.web.dependencies import IntakeDep
from rewards.web.errors import ApiError, bad_request
from rewards.web.openapi import LOG_UNAVAILABLE, request_body_doc, success
from rewards.web.requests import json_body

router = APIRouter(tags=["events"])

ReversalSender = Annotated[Principal, Depends(guard("SendTrackingEvent", "events_reversals"))]


@router.post(
    "/events/reversals",
    openapi_extra=request_body_doc(ReversalsIn),
    responses={
        **success(ReversalsApplied, "Applied, all or none (a reversal sent again counts 0)"),
        404: {"description": "Not Found: an event is unknown or not accepted yet (named); nothing is applied"},
        409: {
            "description": f"Conflict: an event's reversals would sum past 1, or number more than {MAX_PER_EVENT} "
            "(named); nothing is applied"
        },
        **LOG_UNAVAILABLE,
    },
)
async def post_reversals(request: Request, principal: ReversalSender, intake: IntakeDep):
    """Take back a share of events' payouts (a refund, a chargeback, a cancelled order): each payout of an event
    gets a reversing movement of `-fraction × amount`, and every figure drops by it."""
    try:
        reversals = read_reversals(json_body(await request.body()))
    except InvalidReversals as exc:
        raise bad_request(exc.messages) from exc
    try:
        count = await service.reverse(intake.state, intake.log, principal.project_id, reversals, now_ms())
    except service.EventsNotFound as exc:
        messages = service.EventsNotFound.messages(exc.dedup_ids)
        raise ApiError(404, messages[0] if len(messages) == 1 else messages) from exc
    except PastWhole as exc:
        raise ApiError(409, f"event {exc.dedup_id}: its reversals would sum past 1") from exc
    except TooMany as exc:
        raise ApiError(409, f"event {exc.dedup_id}: at most {MAX_PER_EVENT} reversals per event") from exc
    return {"reversed": count}
