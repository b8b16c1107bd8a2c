"""Webhook endpoints (API.md §10): created with a secret shown once, read, changed, deleted, their secret rotated,
a test message sent now, and their deliveries listed and sent again. Knows nothing of HTTP."""

import socket
import uuid
from datetime import UTC, datetime
from urllib.parse import urlsplit

import anyio
import orjson

from rewards.domain import sealing, webhooks
from rewards.domain.errors import DomainError, ErrorKind
from rewards.domain.timestamps import format_timestamp, now_ms
from rewards.domain.webhook_events import PENDING_DELIVERY, Delivery
from rewards.domain.webhooks import TEST_EVENT, Attempt, Endpoint, EndpointNotFound, InvalidEndpoint
from rewards.ports import StateStore, WebhookSender, WebhookStore

RESOLVE_S = 2.0  # a save waits this long for the host's addresses at most


class DeliveryNotFound(DomainError):
    kind = ErrorKind.NOT_FOUND

    def __init__(self) -> None:
        super().__init__("Webhook delivery not found")


async def check_url(url: str, allow_private: bool) -> str:
    """The URL's rules (rewards.domain.webhooks.check_url), and its host's addresses as they resolve now: a name
    resolving to an address inside is refused when saved too (it is checked again at every connection; a name that
    does not resolve now is kept, and refused then if it still does not)."""
    webhooks.check_url(url, allow_private)
    name = urlsplit(url).hostname
    try:
        with anyio.fail_after(RESOLVE_S):
            found = await anyio.getaddrinfo(name, 443, type=socket.SOCK_STREAM)
    except (OSError, TimeoutError):
        return url
    for address in dict.fromkeys(str(info[4][0]) for info in found):
        if not webhooks.address_allowed(address, allow_private):
            raise InvalidEndpoint(f"url must not reach {webhooks.refusal(address)}: {name} resolves to it")
    return url


async def create(
    store: WebhookStore, project_id: str, fields: dict, allow_private: bool, secrets_keys
) -> tuple[Endpoint, str]:
    """A new endpoint and its secret (answered this once)."""
    url = await check_url(fields["url"], allow_private)
    secret = webhooks.new_secret()
    endpoint = Endpoint(
        id=f"wh_{uuid.uuid4().hex[:24]}", url=url, events=webhooks.check_events(fields["events"]),
        description=fields.get("description"), enabled=True,
        sealed_secret=sealing.seal(secret.encode(), secrets_keys), created_ms=now_ms(),
    )  # fmt: skip
    await store.create_webhook(project_id, endpoint)
    return endpoint, secret


async def get(store: WebhookStore, project_id: str, endpoint_id: str) -> Endpoint:
    if (endpoint := await store.get_webhook(project_id, endpoint_id)) is None:
        raise EndpointNotFound()
    return endpoint


async def update(
    store: WebhookStore, project_id: str, endpoint_id: str, changes: dict, allow_private: bool
) -> Endpoint:
    endpoint = await get(store, project_id, endpoint_id)
    if "url" in changes:
        changes["url"] = await check_url(changes["url"], allow_private)
    if "events" in changes:
        changes["events"] = webhooks.check_events(changes["events"])
    changed = endpoint.with_changes(**changes)
    if not await store.put_webhook(project_id, changed):
        raise EndpointNotFound()
    return changed


async def rotate(store: WebhookStore, project_id: str, endpoint_id: str, secrets_keys) -> tuple[Endpoint, str]:
    endpoint = await get(store, project_id, endpoint_id)
    secret = webhooks.new_secret()
    rotated = endpoint.with_changes(sealed_secret=sealing.seal(secret.encode(), secrets_keys))
    if not await store.put_webhook(project_id, rotated):
        raise EndpointNotFound()
    return rotated, secret


async def send_test(
    store: WebhookStore, sender: WebhookSender, project_id: str, endpoint_id: str, secrets_keys
) -> Attempt:
    """A `webhook.test` message sent now (signed, guarded like every delivery); what came of it."""
    endpoint = await get(store, project_id, endpoint_id)
    secret = sealing.unseal(endpoint.sealed_secret, secrets_keys).decode()
    sent_at = datetime.now(UTC)
    data = {"endpoint_id": endpoint.id, "sent_at": format_timestamp(int(sent_at.timestamp() * 1000))}
    body = orjson.dumps({"event_type": TEST_EVENT, "data": data})
    return await sender.send(endpoint.url, secret, f"msg_{uuid.uuid4().hex}", body)


async def delete(state: StateStore, project_id: str, endpoint_id: str) -> None:
    """The endpoint gone, and its deliveries with it (pending ones are not sent)."""
    if not await state.delete_webhook(project_id, endpoint_id):
        raise EndpointNotFound()
    await state.forget_endpoint(project_id, endpoint_id)


async def deliveries(
    state: StateStore, project_id: str, endpoint_id: str, offset: int, limit: int
) -> tuple[list[Delivery], int]:
    """A page of the endpoint's deliveries, newest first, and how many it holds."""
    await get(state, project_id, endpoint_id)
    return await state.list_deliveries(project_id, endpoint_id, offset, limit)


async def redeliver(state: StateStore, project_id: str, endpoint_id: str, delivery_id: str) -> Delivery:
    """The delivery pending again, due now, under its first `webhook-id` (its attempts kept)."""
    await get(state, project_id, endpoint_id)
    if (delivery := await state.redeliver(project_id, endpoint_id, delivery_id, now_ms())) is None:
        raise DeliveryNotFound()
    return delivery


def delivery_json(delivery: Delivery) -> dict:
    pending = delivery.status == PENDING_DELIVERY and delivery.next_attempt_ms is not None
    return {
        "id": delivery.id, "event_type": delivery.event_type, "status": delivery.status,
        "attempts": delivery.attempts, "last_status_code": delivery.last_status_code,
        "last_error": delivery.last_error,
        "next_attempt_at": format_timestamp(delivery.next_attempt_ms) if pending else None,
        "created_at": format_timestamp(delivery.created_ms),
    }  # fmt: skip


def endpoint_json(endpoint: Endpoint) -> dict:
    return {
        "id": endpoint.id, "url": endpoint.url, "events": list(endpoint.events), "description": endpoint.description,
        "enabled": endpoint.enabled, "created_at": format_timestamp(endpoint.created_ms),
    }  # fmt: skip
