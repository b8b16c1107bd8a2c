"""POST /events/batch, POST /events, GET /events/status (API.md §3; §7's tracking events on POST /events): HTTP to
ingest_api.events.service and ingest_api.events.tracking."""

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter

from ingest_api.events import service, tracking
from ingest_api.events.schemas import EventsIngested, EventStatus, InvalidEvents, OneEventIngested, UserEventStatus
from ingest_api.events.tracking_validation import is_tracking_event, validate_tracking_event
from ingest_api.events.validation import parse_json, validate_batch, validate_event
from rewards.domain.tracking import names_project
from rewards.ports import Principal
from rewards.web.auth import guard
from rewards.web.dependencies import Caller, Intake, IntakeDep, StateDep
from rewards.web.errors import ApiError, bad_request
from rewards.web.openapi import INTAKE_UNAVAILABLE, success
from rewards.web.requests import parse_user
from schemas.events import BatchIn, EventIn, FuulEvent

router = APIRouter(tags=["events"])

BatchSender = Annotated[Principal, Depends(guard("SendTrackingEvent", "events_batch"))]
EventSender = Annotated[Principal, Depends(guard("SendTrackingEvent", "events_single"))]


def _json_body(model) -> dict:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema()}}}}


# POST /events: a §3 event, or the client's FuulEvent (a tracking event, API.md §7), told apart by its dedup_id.
_SINGLE_SCHEMA = TypeAdapter(EventIn | FuulEvent).json_schema()
SINGLE_EVENT_DOC = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": _SINGLE_SCHEMA}}},
    "parameters": [
        {"name": "project_id", "in": "query", "required": False, "schema": {"type": "string"},
         "description": "The multi-project form of the published client: must be the key's project (else 403)"}
    ],
}  # fmt: skip

BATCH_RESPONSES = {
    **success(
        EventsIngested,
        "Accepted: the new events are durable (a retry with the same Idempotency-Key and body gets "
        "the first answer again)",
    ),
    409: {"description": "Conflict: the Idempotency-Key was used before with a different body"},
    **INTAKE_UNAVAILABLE,
}


@router.post("/events/batch", openapi_extra=_json_body(BatchIn), responses=BATCH_RESPONSES)
async def post_batch(
    request: Request,
    principal: BatchSender,
    intake: IntakeDep,
    idempotency_key: str | None = Header(None, max_length=255),
):
    body = await request.body()
    try:
        events = validate_batch(parse_json(body))
    except InvalidEvents as exc:
        raise bad_request(exc.messages) from exc
    idempotency = None if idempotency_key is None else (idempotency_key, body)
    count, replay = await _accept(intake, principal.project_id, events, idempotency)
    if replay is not None:
        return Response(replay, media_type="application/json")
    return {"ingested_events": count}


@router.post(
    "/events",
    status_code=201,
    openapi_extra=SINGLE_EVENT_DOC,
    responses={
        **success(
            OneEventIngested, "Created: the event is accepted (a tracking event: stored, or 0 for an exact repeat)", 201
        ),
        403: {
            "description": "Forbidden: the key lacks the scope, or a tracking event's project_id names another project"
        },
        409: {"description": "Event already exists: its dedup_id is known (never for a tracking event)"},
        **INTAKE_UNAVAILABLE,
    },
)
async def post_event(request: Request, principal: EventSender, intake: IntakeDep):
    """One §3 event (with a dedup_id), or a tracking event of the published client (API.md §7: without one)."""
    raw = _valid(parse_json, await request.body())
    if is_tracking_event(raw):
        # The client's multi-project form names the project in the query string and the body; a §3 event ignores an
        # unknown query parameter (§0), project_id included.
        _check_projects(request.query_params.getlist("project_id"), principal.project_id)
        tracked = _valid(validate_tracking_event, raw)
        _check_projects(tracked.project_ids, principal.project_id)
        windows = tracking.Windows(attribution_s=intake.attribution_window_s)
        count = await tracking.track(
            intake.state, intake.log, intake.backpressure, principal.project_id, tracked, windows
        )
        return JSONResponse({"ingested_events": count}, status_code=201)  # 0: an exact repeat, never a 409
    event = _valid(validate_event, raw)
    count, _ = await _accept(intake, principal.project_id, [event], None)
    if count == 0:
        raise ApiError(409, "Event already exists")
    return JSONResponse({"ingested_events": 1}, status_code=201)


def _valid(validate, raw):
    try:
        return validate(raw)
    except InvalidEvents as exc:
        raise bad_request(exc.messages) from exc


def _check_projects(named, project_id: str) -> None:
    """The multi-project form names a project (query, body): it must be the key's."""
    if any(not names_project(name, project_id) for name in named):
        raise ApiError(403, "project_id is not this key's project")


async def _accept(intake: Intake, project_id, events, idempotency):
    return await service.accept(intake.state, intake.log, intake.backpressure, project_id, events, idempotency)


@router.get(
    "/events/status",
    responses=success(EventStatus | UserEventStatus, "The event's status (with dedup_id), or the user's (without)"),
)
async def event_status(
    principal: Caller,
    state: StateDep,
    dedup_id: str | None = Query(None, max_length=255),
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    event_name: str | None = Query(None, max_length=128),
):
    if dedup_id is not None:
        return {"dedup_id": dedup_id, "status": await service.event_status(state, principal.project_id, dedup_id)}
    if event_name is None:
        raise bad_request("dedup_id, or user_identifier, user_identifier_type and event_name, are required")
    user = parse_user(user_identifier, user_identifier_type)
    return await service.user_event_status(state, principal.project_id, user, event_name)
