"""POST /events/batch, POST /events, GET /events/status (API.md §3): HTTP to ingest_api.events.service."""

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, Response

from ingest_api.events import service
from ingest_api.events.validation import InvalidEvents, parse_json, validate_batch, validate_event
from rewards.ports import Principal
from rewards.web.errors import ApiError, bad_request
from rewards.web.http import LOG_UNAVAILABLE, backends_of, guard, parse_user
from schemas.events import BatchIn, EventIn

router = APIRouter(tags=["events"])


def _json_body(model) -> dict:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema()}}}}


BATCH_RESPONSES = {
    200: {"description": "Accepted"},
    409: {"description": "Conflict: the Idempotency-Key was used before with a different body"},
    **LOG_UNAVAILABLE,
}


@router.post("/events/batch", openapi_extra=_json_body(BatchIn), responses=BATCH_RESPONSES)
async def post_batch(
    request: Request,
    principal: Principal = Depends(guard("SendTrackingEvent", "events_batch")),
    idempotency_key: str | None = Header(None, max_length=255),
):
    body = await request.body()
    try:
        events = validate_batch(parse_json(body))
    except InvalidEvents as exc:
        raise bad_request(exc.messages) from exc
    backends = backends_of(request)
    idempotency = None if idempotency_key is None else (idempotency_key, body)
    count, replay = await _accept(backends, principal.project_id, events, idempotency)
    if replay is not None:
        return Response(replay, media_type="application/json")
    return {"ingested_events": count}


@router.post(
    "/events",
    status_code=201,
    openapi_extra=_json_body(EventIn),
    responses={409: {"description": "Event already exists: its dedup_id is known"}, **LOG_UNAVAILABLE},
)
async def post_event(request: Request, principal: Principal = Depends(guard("SendTrackingEvent", "events_single"))):
    try:
        event = validate_event(parse_json(await request.body()))
    except InvalidEvents as exc:
        raise bad_request(exc.messages) from exc
    count, _ = await _accept(backends_of(request), principal.project_id, [event], None)
    if count == 0:
        raise ApiError(409, "Event already exists")
    return JSONResponse({"ingested_events": 1}, status_code=201)


async def _accept(backends, project_id, events, idempotency):
    return await service.accept(backends.state, backends.log, backends.backpressure, project_id, events, idempotency)


@router.get("/events/status")
async def event_status(
    request: Request,
    principal: Principal = Depends(guard(None)),
    dedup_id: str | None = Query(None, max_length=255),
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    event_name: str | None = Query(None, max_length=128),
):
    state = backends_of(request).state
    if dedup_id is not None:
        return {"dedup_id": dedup_id, "status": await service.event_status(state, principal.project_id, dedup_id)}
    if event_name is None:
        raise bad_request("dedup_id, or user_identifier, user_identifier_type and event_name, are required")
    user = parse_user(user_identifier, user_identifier_type)
    return await service.user_event_status(state, principal.project_id, user, event_name)
