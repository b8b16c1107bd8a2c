"""What webhooks send (API.md §10), pure: the bodies of the events, their stable `webhook-id`s, a delivery and what
an attempt makes of it (when it is tried again, when it has failed, when its endpoint is disabled)."""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TypeVar

from rewards.domain.amounts import format_amount

ACCEPTED, REJECTED, PENDING = "accepted", "rejected", "pending"  # a reward.earned movement's status
# API.md §10: retried after about 5 s, 30 s, 2 min, 10 min, 1 h, then every 6 h for 3 days.
RETRY_DELAYS_MS = (5_000, 30_000, 120_000, 600_000, 3_600_000)
LATER_EVERY_MS = 6 * 3_600_000
GIVE_UP_AFTER_MS = 3 * 86_400_000
DISABLE_AFTER_MS = 5 * 86_400_000  # an endpoint failing every attempt this long is disabled (or at once on a 410)

PENDING_DELIVERY, SUCCEEDED, FAILED = "pending", "succeeded", "failed"  # a delivery's status (API.md §10)
# Finished deliveries (succeeded or failed) are kept this long for GET /webhooks/{id}/deliveries and redelivery, and
# at most this many per endpoint (the newest); pending ones are kept until they finish (3 days of retries at most).
RETAIN_MS = 7 * 86_400_000
RETAIN_PER_ENDPOINT = 10_000
LEASE_MS = 30_000  # an attempt's hold on a delivery: a dispatcher that died mid-send leaves it to be tried after this
_K = TypeVar("_K")


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event for one endpoint, until it succeeded or failed (API.md §10's deliveries)."""

    id: str  # the `webhook-id`, the same at every attempt and redelivery (webhook_id)
    project_id: str
    endpoint_id: str
    event_type: str
    body: bytes  # the JSON sent, signed at each attempt
    created_ms: int
    status: str = PENDING_DELIVERY
    attempts: int = 0
    next_attempt_ms: int | None = None  # pending: when it is due (or its lease ends); None once finished
    window_ms: int = 0  # its retries' 3 days count from here: its creation, or its last redelivery by hand
    last_status_code: int | None = None
    last_error: str | None = None


def new_delivery(project_id: str, endpoint_id: str, event_type: str, subject_id: str, body: bytes, now: int):
    """A delivery due now, its id stable for (endpoint, event type, subject)."""
    return Delivery(
        webhook_id(endpoint_id, event_type, subject_id), project_id, endpoint_id, event_type, body, now,
        next_attempt_ms=now, window_ms=now,
    )  # fmt: skip


def after_attempt(delivery: Delivery, ok: bool, status_code: int | None, error: str | None, now: int) -> Delivery:
    """A delivery once tried at `now`: succeeded on a 2xx; else due again on the schedule, or failed past 3 days (or
    at once on a 410: its endpoint is disabled)."""
    attempts = delivery.attempts + 1
    if ok:
        return replace(delivery, status=SUCCEEDED, attempts=attempts, next_attempt_ms=None,
                       last_status_code=status_code, last_error=None)  # fmt: skip
    due = None if status_code == 410 else next_attempt_ms(attempts, delivery.window_ms, now)
    return replace(
        delivery, status=PENDING_DELIVERY if due is not None else FAILED, attempts=attempts, next_attempt_ms=due,
        last_status_code=status_code, last_error=error or f"answered {status_code}",
    )  # fmt: skip


def redelivered(delivery: Delivery, now: int) -> Delivery:
    """A delivery sent again by hand: due now, with 3 days of retries from now (its id and attempts kept)."""
    return replace(delivery, status=PENDING_DELIVERY, next_attempt_ms=now, window_ms=now)


def lease_shares(rooms: Mapping[_K, int], limit: int) -> dict[_K, int]:
    """How many of its due deliveries each endpoint gets in one lease of at most `limit`: shared out evenly, none more
    than its room (`rooms`: its room, or how many it has due when fewer, earliest due endpoint first, which gets any
    remainder), so that an endpoint with a long backlog never crowds the others out of a batch."""
    shares = dict.fromkeys(rooms, 0)
    left, open_ = limit, [key for key, room in rooms.items() if room > 0]
    while left > 0 and open_:
        each = max(1, left // len(open_))
        for key in list(open_):
            given = min(each, rooms[key] - shares[key], left)
            shares[key] += given
            left -= given
            if shares[key] == rooms[key]:
                open_.remove(key)
            if left == 0:
                break
    return shares


def delivery_to_json(delivery: Delivery) -> dict:
    """How the state store keeps a delivery (its body as text: it is JSON)."""
    return {
        "id": delivery.id, "project_id": delivery.project_id, "endpoint_id": delivery.endpoint_id,
        "event_type": delivery.event_type, "body": delivery.body.decode(), "created_ms": delivery.created_ms,
        "status": delivery.status, "attempts": delivery.attempts, "next_attempt_ms": delivery.next_attempt_ms,
        "window_ms": delivery.window_ms, "last_status_code": delivery.last_status_code,
        "last_error": delivery.last_error,
    }  # fmt: skip


def delivery_from_json(document: dict) -> Delivery:
    return Delivery(**{**document, "body": document["body"].encode()})


def webhook_id(endpoint_id: str, event_type: str, subject_id: str) -> str:
    """The `webhook-id` of an event for an endpoint: the same whenever the event is met again (a dispatcher reading
    the log again after a crash enqueues the same ids, and a receiver dedups by them)."""
    digest = hashlib.sha256(f"{endpoint_id}\x1f{event_type}\x1f{subject_id}".encode()).hexdigest()
    return f"msg_{digest[:32]}"


def next_attempt_ms(attempts: int, first_ms: int, now_ms: int) -> int | None:
    """When a delivery tried `attempts` times (the first at `first_ms`), the last just now, is tried again; None: it
    has had its 3 days (`failed`, redeliverable by hand)."""
    delay = RETRY_DELAYS_MS[attempts - 1] if attempts <= len(RETRY_DELAYS_MS) else LATER_EVERY_MS
    due = now_ms + delay
    return None if due - first_ms > GIVE_UP_AFTER_MS else due


def disables(status_code: int | None, failing_since_ms: int | None, now_ms: int) -> bool:
    """Whether an endpoint is disabled after an attempt: it answered 410 Gone, or every attempt failed for 5 days."""
    if status_code == 410:
        return True
    return failing_since_ms is not None and now_ms - failing_since_ms >= DISABLE_AFTER_MS


def reward_earned(payout: dict, status: str, details: str | None, conversion_name: str, created_at: str) -> dict:
    """The hosted service's `reward.earned` body for a payout (a payouts row: paid `accepted`, refused `rejected` with
    its rule, held for approval `pending`)."""
    points = payout["currency"] == "point"
    currency = (
        {"name": "POINT", "address": None, "chain_id": None}
        if points
        else {
            "name": payout["currency_name"],
            "address": payout["currency"],
            "chain_id": int(payout["currency_chain_id"]),
        }
    )
    return {
        "event_type": "reward.earned",
        "movement": {
            "type": "point" if points else "onchain-currency",
            "reason": "affiliate_payout" if payout["role"] == "affiliate" else "end_user_payout",
            "status": status,
            "status_details": details,
            "user_identifier": payout["recipient_identifier"],
            "user_identifier_type": payout["recipient_identifier_type"],
            "amount": format_amount(Decimal(str(payout["amount"]))),
            "currency": currency,
            "conversion_name": conversion_name,
            "created_at": created_at,
        },
    }


def event(event_type: str, data: dict) -> dict:
    """Our other events' body (API.md §10): `data` is the object the read API answers for it."""
    return {"event_type": event_type, "data": data}
