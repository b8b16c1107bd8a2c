"""The webhook endpoints API (API.md §10, service_role): HTTP to ingest_api.webhooks.service."""

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from ingest_api.webhooks import service
from ingest_api.webhooks.schemas import (
    Deleted,
    EndpointAnswer,
    EndpointChange,
    EndpointIn,
    EndpointWithSecret,
    TestAttempt,
)
from rewards.web.dependencies import ServiceCaller, SettingsDep, StateDep, WebhookSenderDep
from rewards.web.errors import bad_request, not_found, validation_messages
from rewards.web.openapi import request_body_doc, success
from rewards.web.requests import json_body

router = APIRouter(prefix="/webhooks", tags=["webhooks"])
NOT_FOUND = {404: {"description": "Not Found: no such endpoint in the project"}}


@router.post(
    "",
    status_code=201,
    openapi_extra=request_body_doc(EndpointIn),
    responses={
        **success(EndpointWithSecret, "Created: its secret is answered this once", 201),
        409: {"description": "Conflict: the project has 20 endpoints already"},
    },
)
async def create(request: Request, principal: ServiceCaller, state: StateDep, settings: SettingsDep):
    """An endpoint: messages of the event types it names go to its URL, signed with its secret."""
    body = await _body(request, EndpointIn)
    endpoint, secret = await service.create(
        state, principal.project_id, body.model_dump(), settings.webhooks_allow_private, settings.secrets_keys
    )
    return JSONResponse({**service.endpoint_json(endpoint), "secret": secret}, status_code=201)


@router.get("", responses=success(list[EndpointAnswer], "The project's endpoints, oldest first"))
async def list_endpoints(principal: ServiceCaller, state: StateDep):
    return [service.endpoint_json(endpoint) for endpoint in await state.list_webhooks(principal.project_id)]


@router.get("/{endpoint_id}", responses={**success(EndpointAnswer, "The endpoint"), **NOT_FOUND})
async def get_endpoint(endpoint_id: str, principal: ServiceCaller, state: StateDep):
    return service.endpoint_json(await service.get(state, principal.project_id, endpoint_id))


@router.patch(
    "/{endpoint_id}",
    openapi_extra=request_body_doc(EndpointChange),
    responses={**success(EndpointAnswer, "The endpoint, changed"), **NOT_FOUND},
)
async def change(endpoint_id: str, request: Request, principal: ServiceCaller, state: StateDep, settings: SettingsDep):
    """Change its url, events, description or enabled (what is absent stays)."""
    body = await _body(request, EndpointChange)
    changes = body.model_dump(exclude_unset=True)
    if any(value is None for name, value in changes.items() if name != "description"):
        raise bad_request("url, events and enabled cannot be null")
    endpoint = await service.update(state, principal.project_id, endpoint_id, changes, settings.webhooks_allow_private)
    return service.endpoint_json(endpoint)


@router.delete("/{endpoint_id}", responses={**success(Deleted, "Deleted"), **NOT_FOUND})
async def delete(endpoint_id: str, principal: ServiceCaller, state: StateDep):
    if not await state.delete_webhook(principal.project_id, endpoint_id):
        raise not_found("Webhook endpoint not found")
    return {"id": endpoint_id, "deleted": True}


@router.post(
    "/{endpoint_id}/rotate-secret",
    responses={**success(EndpointWithSecret, "A new secret, answered this once (the old signs no more)"), **NOT_FOUND},
)
async def rotate_secret(endpoint_id: str, principal: ServiceCaller, state: StateDep, settings: SettingsDep):
    endpoint, secret = await service.rotate(state, principal.project_id, endpoint_id, settings.secrets_keys)
    return {**service.endpoint_json(endpoint), "secret": secret}


@router.post(
    "/{endpoint_id}/test",
    responses={**success(TestAttempt, "The attempt: a webhook.test message sent now"), **NOT_FOUND},
)
async def test(
    endpoint_id: str, principal: ServiceCaller, state: StateDep, sender: WebhookSenderDep, settings: SettingsDep
):
    """Send a `webhook.test` message now (signed, under the same address rules as every delivery) and answer how it
    went."""
    attempt = await service.send_test(state, sender, principal.project_id, endpoint_id, settings.secrets_keys)
    return {"webhook_id": attempt.webhook_id, "delivered": attempt.ok, "status_code": attempt.status_code,
            "error": attempt.error, "duration_ms": attempt.duration_ms}  # fmt: skip


async def _body(request: Request, model: type[BaseModel]):
    try:
        return model.model_validate(json_body(await request.body()))
    except ValidationError as exc:
        raise bad_request(validation_messages(exc.errors())) from exc
