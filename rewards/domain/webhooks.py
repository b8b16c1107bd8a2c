"""Webhook endpoints (API.md §10): what a project's backend subscribes to, and the rules of a URL the service may call.

A URL is a customer's: the service calls it from inside its own network, so it must be `https://` and reach a public
address only (no loopback, private, link-local, shared or metadata address), checked when it is saved and again
whenever a connection is made (rewards.adapters.webhook_sender: a name rebound to another address in between cannot
reach it). An operator's development setting (REWARDS_WEBHOOKS_ALLOW_PRIVATE) allows `http://` and every address."""

import base64
import ipaddress
import secrets
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from rewards.domain.errors import DomainError, ErrorKind

EVENT_TYPES = (
    "reward.earned", "reward.reversed", "referral.created", "referral.removed", "affiliate.registered",
    "claim_check.closed", "claim_check.claimed", "claim_check.expired", "payout.pending_approval",
)  # fmt: skip
TEST_EVENT = "webhook.test"
MAX_ENDPOINTS = 20  # per project (API.md §10: a 21st is 409)
MAX_URL_LENGTH = 2048
MAX_DESCRIPTION_LENGTH = 500
SECRET_PREFIX = "whsec_"


class InvalidEndpoint(DomainError):
    """An endpoint the service will not call (its URL, its events): 400 naming why."""


class TooManyEndpoints(DomainError):
    kind = ErrorKind.CONFLICT

    def __init__(self) -> None:
        super().__init__(f"a project has at most {MAX_ENDPOINTS} webhook endpoints")


class EndpointNotFound(DomainError):
    kind = ErrorKind.NOT_FOUND

    def __init__(self) -> None:
        super().__init__("Webhook endpoint not found")


@dataclass(frozen=True)
class Endpoint:
    id: str
    url: str
    events: tuple[str, ...]
    description: str | None
    enabled: bool
    sealed_secret: str  # rewards.domain.sealing: never answered but at creation and rotation
    created_ms: int

    def with_changes(self, **changes) -> "Endpoint":
        return replace(self, **changes)


@dataclass(frozen=True)
class Attempt:
    """What came of one call of an endpoint's URL."""

    webhook_id: str
    status_code: int | None  # None: no answer (refused, unreachable, timed out)
    ok: bool  # a 2xx
    error: str | None
    answer: str  # its first bytes (rewards.adapters.webhook_sender.MAX_ANSWER_BYTES)
    duration_ms: int


def to_json(endpoint: Endpoint) -> dict:
    """The endpoint as the state store keeps it (its secret sealed)."""
    return {
        "id": endpoint.id, "url": endpoint.url, "events": list(endpoint.events), "description": endpoint.description,
        "enabled": endpoint.enabled, "sealed_secret": endpoint.sealed_secret, "created_ms": endpoint.created_ms,
    }  # fmt: skip


def from_json(document: dict) -> Endpoint:
    return Endpoint(
        document["id"], document["url"], tuple(document["events"]), document["description"], document["enabled"],
        document["sealed_secret"], document["created_ms"],
    )  # fmt: skip


def new_secret() -> str:
    """A signing secret as the Standard Webhooks specification writes one: `whsec_` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def check_url(url: str, allow_private: bool) -> str:
    """The URL if the service may call it (its address is checked again when connecting), else InvalidEndpoint."""
    if len(url) > MAX_URL_LENGTH:
        raise InvalidEndpoint(f"url must be at most {MAX_URL_LENGTH} characters")
    parts = urlsplit(url)
    schemes = ("https", "http") if allow_private else ("https",)
    if parts.scheme not in schemes:
        raise InvalidEndpoint("url must be https://" + ("" if not allow_private else " or http://"))
    if not parts.hostname:
        raise InvalidEndpoint("url must name a host")
    if parts.username is not None or parts.password is not None:
        raise InvalidEndpoint("url must not carry credentials (the signature authenticates the service)")
    try:
        parts.port  # noqa: B018 (raises on a port out of range)
    except ValueError as exc:
        raise InvalidEndpoint("url has an invalid port") from exc
    try:
        literal = ipaddress.ip_address(parts.hostname)
    except ValueError:
        literal = None
    if literal is not None and not address_allowed(str(literal), allow_private):
        raise InvalidEndpoint(f"url must not reach {refusal(str(literal))}")
    return url


def address_allowed(address: str, allow_private: bool) -> bool:
    """Whether a connection may go to this IP address: a public one (or any, in development)."""
    if allow_private:
        return True
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # (an IPv6 scope id names a link: it is link-local anyway)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def refusal(address: str) -> str:
    """What kind of address a refused one is, for the message."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind, flag in (("a loopback", ip.is_loopback), ("a link-local or metadata", ip.is_link_local),
                       ("a private", ip.is_private), ("a multicast", ip.is_multicast)):  # fmt: skip
        if flag:
            return f"{kind} address ({ip})"
    return f"a non-public address ({ip})"


def check_events(events: list[str]) -> tuple[str, ...]:
    unknown = [event for event in events if event not in EVENT_TYPES]
    if unknown:
        raise InvalidEndpoint(f"events: unknown event type {unknown[0]!r} (one of {', '.join(EVENT_TYPES)})")
    if not events:
        raise InvalidEndpoint("events must name at least one event type")
    return tuple(dict.fromkeys(events))
