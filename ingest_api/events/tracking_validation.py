"""Validation of the published client's tracking events (API.md §7): the FuulEvent shape, then its user, its amounts
and the bounds of §3's events."""

from dataclasses import dataclass

from ingest_api.events.schemas import InvalidEvents
from ingest_api.events.validation import single_event
from rewards.domain.identifiers import InvalidIdentifier, canonical_identifier
from rewards.domain.limits import LimitError, parse_amount
from rewards.domain.payouts import User
from schemas.events import FuulEvent

# -- tracking events (API.md §7) -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrackingEvent:
    """A tracking event of the published client (POST /events without a dedup_id), valid."""

    name: str
    tracking_id: str
    user: User | None  # `user`, else §3's user fields, else `user_address` (an EVM address); None: none named
    args: dict  # as sent, but a bare `value` / `revenue` amount made §3's `{"amount": ...}`
    metadata: dict  # as sent
    signature: str | None
    signature_message: str | None
    signature_public_key: str | None
    account_chain_id: int | None
    project_ids: tuple[str, ...]  # the projects the body names (`project_id`, `metadata.project_id`)
    sent: dict  # the body as sent


def is_tracking_event(raw: object) -> bool:
    """A single event without a dedup_id is a tracking event (API.md §7); anything else is §3's."""
    return isinstance(raw, dict) and "dedup_id" not in raw


def validate_tracking_event(raw: dict) -> TrackingEvent:
    """The tracking event, or InvalidEvents naming every problem: the bounds of §3's events (depth, then size), the
    client's FuulEvent shape (schemas.events), its user's identifier and its amounts."""
    metadata = raw.get("metadata")
    if not isinstance(metadata, dict) or "tracking_id" not in metadata:
        raise InvalidEvents(["dedup_id is required, or metadata.tracking_id for a tracking event (API.md §7)"])
    event = single_event(FuulEvent, raw)
    messages: list[str] = []
    user = _tracking_user(event, messages)
    args = _tracking_args(event.args or {}, messages)
    if messages:
        raise InvalidEvents(messages)
    named = (event.project_id, event.metadata.project_id)
    return TrackingEvent(
        name=event.name,
        tracking_id=event.metadata.tracking_id,
        user=user,
        args=args,
        metadata=metadata,
        signature=event.signature,
        signature_message=event.signature_message,
        signature_public_key=event.signature_public_key,
        account_chain_id=event.account_chain_id,
        project_ids=tuple(dict.fromkeys(p for p in named if p is not None)),
        sent=raw,
    )


def _tracking_user(event: FuulEvent, messages: list[str]) -> User | None:
    if event.user is not None:
        identifier, identifier_type, field = event.user.identifier, event.user.identifier_type, "user"
    elif event.user_identifier is not None or event.user_identifier_type is not None:
        identifier, identifier_type, field = event.user_identifier, event.user_identifier_type, "user_identifier"
        if identifier is None or identifier_type is None:
            messages.append(f"{'user_identifier' if identifier is None else 'user_identifier_type'} is required")
            return None
    elif event.user_address is not None:
        identifier, identifier_type, field = event.user_address, "evm_address", "user_address"
    else:
        return None
    try:
        return User(canonical_identifier(identifier, identifier_type), identifier_type)
    except InvalidIdentifier as exc:
        messages.append(f"{field}: {exc}")
        return None


def _tracking_args(args: dict, messages: list[str]) -> dict:
    """`args` with `value` and `revenue` checked as §3's amounts; a bare amount (a JSON number or a decimal string,
    as `sendEvent('purchase', {value: 10})` sends it) becomes `{"amount": <it>}`."""
    fixed = dict(args)
    for key in ("value", "revenue"):
        if key not in args:
            continue
        arg = args[key]
        if isinstance(arg, str | int | float) and not isinstance(arg, bool):
            fixed[key], amount, field = {"amount": arg}, arg, f"args.{key}"
        elif isinstance(arg, dict) and "amount" in arg:
            amount, field = arg["amount"], f"args.{key}.amount"
        else:
            messages.append(f"args.{key} must be an amount, or an object with an amount")
            continue
        try:
            parse_amount(amount)
        except LimitError as exc:
            messages.append(f"{field} {exc}")
    return fixed
