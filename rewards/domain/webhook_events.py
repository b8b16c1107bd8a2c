"""What webhooks send (API.md §10), pure: the bodies of the events, their stable `webhook-id`s, and when a delivery
is tried again. The dispatcher that reads what the pipeline wrote and delivers these is issue 31's next part."""

import hashlib
from decimal import Decimal

from rewards.domain.amounts import format_amount

ACCEPTED, REJECTED, PENDING = "accepted", "rejected", "pending"  # a reward.earned movement's status
# API.md §10: retried after about 5 s, 30 s, 2 min, 10 min, 1 h, then every 6 h for 3 days.
RETRY_DELAYS_MS = (5_000, 30_000, 120_000, 600_000, 3_600_000)
LATER_EVERY_MS = 6 * 3_600_000
GIVE_UP_AFTER_MS = 3 * 86_400_000
DISABLE_AFTER_MS = 5 * 86_400_000  # an endpoint failing every attempt this long is disabled (or at once on a 410)


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
