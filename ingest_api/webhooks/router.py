"""The webhook endpoints API (API.md §10, service_role): HTTP to ingest_api.webhooks.service."""

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from ingest_api.webhooks import service
from ingest_api.webhooks.schemas import (
    Deleted,
    DeliveriesPage,
    DeliveryAnswer,
    EndpointAnswer,
    EndpointChange,
    EndpointIn,
    EndpointsPage,
    EndpointWithSecret,
    TestAttempt,
)
from rewards.web.dependencies import ServiceCaller, SettingsDep, StateDep, WebhookSenderDep
from rewards.web.errors import bad_request, validation_messages
from rewards.web.openapi import request_body_doc, success
from rewards.web.requests import PageParams, json_body

router = APIRouter(prefix="/webhooks", tags=["webhooks"])
NOT_FOUND = {404: {"description": "Not Found: no such endpoint in the project"}}
NO_DELIVERY = {404: {"description": "Not Found: no such endpoint in the project, or no such delivery of it"}}


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


@router.get("", responses=success(EndpointsPage, "A page of the project's endpoints, oldest first"))
async def list_endpoints(principal: ServiceCaller, state: StateDep, page=PageParams):
    """The project's endpoints, oldest first (at most 20: the page is cut from all of them)."""
    endpoints = await state.list_webhooks(principal.project_id)
    return {
        "results": [service.endpoint_json(endpoint) for endpoint in endpoints[page.offset : page.offset + page.size]],
        "total_count": len(endpoints),
        "next_page": page.next_page(len(endpoints)),
    }


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
    """Delete the endpoint: nothing more is sent to it, and its deliveries (pending ones too) are gone."""
    await service.delete(state, principal.project_id, endpoint_id)
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


@router.get(
    "/{endpoint_id}/deliveries",
    responses={**success(DeliveriesPage, "A page of the endpoint's deliveries, newest first"), **NOT_FOUND},
)
async def deliveries(endpoint_id: str, principal: ServiceCaller, state: StateDep, page=PageParams):
    """The endpoint's deliveries, newest first (one made between two reads goes on top: later pages shift by one)."""
    listed, total = await service.deliveries(state, principal.project_id, endpoint_id, page.offset, page.size)
    return {
        "results": [service.delivery_json(delivery) for delivery in listed],
        "total_count": total,
        "next_page": page.next_page(total),
    }


@router.post(
    "/{endpoint_id}/deliveries/{delivery_id}/redeliver",
    status_code=202,
    responses={**success(DeliveryAnswer, "Accepted: the delivery, pending again and due now", 202), **NO_DELIVERY},
)
async def redeliver(endpoint_id: str, delivery_id: str, principal: ServiceCaller, state: StateDep):
    """Send a delivery again (a failed one, typically): pending, due now, with 3 days of retries from now, under the
    same `webhook-id` as its first attempt (a receiver that has it already dedups it)."""
    delivery = await service.redeliver(state, principal.project_id, endpoint_id, delivery_id)
    return JSONResponse(service.delivery_json(delivery), status_code=202)


async def _body(request: Request, model: type[BaseModel]):
    try:
        return model.model_validate(json_body(await request.body()))
    except ValidationError as exc:
        raise bad_request(validation_messages(exc.errors())) from exc
