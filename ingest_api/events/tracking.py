"""Tracking events of the published client (API.md §7): `sendPageview`, `identifyUser` and `sendEvent` post to
POST /events without a dedup_id. Knows nothing of HTTP.

Every one goes on the log like any event, after the state store's repeat check (an exact repeat of the last minute is
stored once):
- `pageview`: a tracking event. If its `metadata.affiliate_id` (else `metadata.referrer`) names a referral code of
  the project, the event counts one click for that code (its `code`), and the tracking id is bound to the code for the
  attribution window.
- `connect_wallet`: a tracking event that binds the tracking id to its user. If the tracking id arrived through a
  code, the user becomes referred by the code's owner, as if the code were used (ReferralStore.use_code: its rules,
  its CodeUseRecord, so the same referral reward); the use's record and the event (its `code`: an attribution) are
  one message. A use the rules refuse is not made, counted and logged.
- any other name: a conversion (§3, paid like §6) when the configuration names it and the event has a user (its own,
  else the one a connect_wallet bound its tracking id to), under a dedup id derived from the request and its time;
  else a tracking event, which pays nothing.
"""

from dataclasses import dataclass

import structlog
from prometheus_client import Counter

from ingest_api.events import service
from ingest_api.events.schemas import ValidEvent
from ingest_api.events.tracking_validation import TrackingEvent
from ingest_api.signatures import check_signed
from rewards.domain import signatures, tracking
from rewards.domain.errors import DomainError
from rewards.domain.payouts import Rules, User
from rewards.domain.referrals import ReferralError
from rewards.domain.timestamps import now_ms
from rewards.ports import EventLog, StateStore, Unavailable
from rewards.web.backpressure import Backpressure
from schemas.records import TrackingEventRecord, dump_records, load_records

logger = structlog.get_logger(__name__)
TRACKED = Counter("rewards_tracking_events_total", "Tracking events accepted (repeats excluded), by outcome", ["kind"])
REPEATS = Counter("rewards_tracking_repeats_total", "Tracking events dropped as exact repeats within a minute")
REFUSED = Counter(
    "rewards_tracking_attributions_refused_total",
    "connect_wallet referrals through a tracked code that the referral rules refused",
    ["reason"],
)


@dataclass(frozen=True)
class Windows:
    attribution_s: float  # how long a tracking id stays bound to its code and to its user
    repeat_s: float = tracking.REPEAT_WINDOW_S


async def track(
    state: StateStore,
    log: EventLog,
    backpressure: Backpressure | None,
    project_id: str,
    event: TrackingEvent,
    windows: Windows,
) -> int:
    """Store the event (see the module); returns 1, or 0 for an exact repeat within the repeat window. Whatever fails
    but the log or a domain rule raises NotAccepted (503: nothing was accepted; the repeat check is undone). An event
    naming a user carries that user's signature of its signature_message when the project verifies signatures
    (InvalidSignature otherwise: nothing stored)."""
    if backpressure is not None:
        await backpressure.admit()
    try:
        if event.user is not None:
            expected = signatures.tracking_event_message(project_id, event.name, event.user, event.tracking_id)
            await check_signed(state, project_id, (event.user,), expected, event.signature, event.signature_message)
        return await _track(state, log, project_id, event, windows)
    except (DomainError, Unavailable):
        raise
    except Exception as exc:
        raise service.NotAccepted(str(exc)) from exc


async def _track(state: StateStore, log: EventLog, project_id: str, event: TrackingEvent, windows: Windows) -> int:
    received = now_ms()
    key = tracking.repeat_key(event.name, event.tracking_id, event.user, event.args, event.metadata)
    async with state.first_within(project_id, key, windows.repeat_s) as first:
        if not first:
            REPEATS.inc()
            return 0
        if event.name == tracking.PAGEVIEW:
            kind = await _pageview(state, log, project_id, event, received, windows)
        elif event.name == tracking.CONNECT_WALLET:
            kind = await _connect_wallet(state, log, project_id, event, received, windows)
        else:
            kind = await _other(state, log, project_id, event, received)
    TRACKED.labels(kind).inc()
    return 1


async def _pageview(
    state: StateStore, log: EventLog, project_id: str, event: TrackingEvent, received: int, windows: Windows
) -> str:
    code = await _code_named(state, project_id, event.metadata)
    if code is not None:
        await state.bind_code(project_id, event.tracking_id, code, windows.attribution_s)
    await log.publish(project_id, dump_records([_record(project_id, event, received, event.user, code or "")]))
    return "click" if code is not None else "pageview"


async def _code_named(state: StateStore, project_id: str, metadata: dict) -> str | None:
    """The project's code a pageview names (as the store writes it), if any."""
    for candidate in tracking.named_codes(metadata):
        record = await state.get_code(project_id, candidate)
        if record is not None:
            return record.code
    return None


async def _connect_wallet(
    state: StateStore,
    log: EventLog,
    project_id: str,
    event: TrackingEvent,
    received: int,
    windows: Windows,
) -> str:
    """Binds the tracking id to the user; a connect_wallet without a user binds nothing. Never a conversion, even if
    the configuration names `connect_wallet` (send a §3 event with a dedup_id to pay for a connection)."""
    user = event.user
    code = None if user is None else await state.bind_user(project_id, event.tracking_id, user, windows.attribution_s)
    if code is not None and await _referred_through(state, log, project_id, event, user, code, received):
        return "attribution"
    await log.publish(project_id, dump_records([_record(project_id, event, received, user, "")]))
    return "connect_wallet"


async def _referred_through(
    state: StateStore, log: EventLog, project_id: str, event: TrackingEvent, user: User, code: str, received: int
) -> bool:
    """Use `code` for `user` as PATCH /referral_codes/{code}/use does; the use's record and the event (counting one
    attribution for the code) are published as one message. False when the rules refuse the use (nothing changed)."""
    proof = {
        "signature": event.signature,
        "signature_message": event.signature_message,
        "signature_public_key": event.signature_public_key,
        "chain_id": event.account_chain_id,
        "tracking_id": event.tracking_id,
    }
    proof = {name: value for name, value in proof.items() if value is not None}
    try:
        async with state.use_code(project_id, code, user, proof) as used:
            _, use = used.value
            # The use's payload first: besides the use it may carry an earlier change it made stand (a removal of
            # the user's referral whose publish is still pending: rewards.ports.Change), which must come before it.
            tracked = _record(project_id, event, received, user, use.code)
            await log.publish(project_id, dump_records([*load_records(used.payload), tracked]))
    except ReferralError as exc:  # own code, cycle, already referred, code used up (or gone since the pageview)
        reason = type(exc).__name__
        REFUSED.labels(reason).inc()
        logger.info(
            "connect_wallet referral not made",
            project_id=project_id,
            code=code,
            tracking_id=event.tracking_id,  # not the user: an identifier may be an email address (personal data)
            reason=reason,
            message=str(exc),
        )
        return False
    return True


async def _other(state: StateStore, log: EventLog, project_id: str, event: TrackingEvent, received: int) -> str:
    user = event.user or await state.tracked_user(project_id, event.tracking_id)
    if user is not None and Rules(await state.get_config(project_id)).names(event.name):
        conversion = ValidEvent(
            name=event.name,
            dedup_id=tracking.dedup_id(event.sent, received),
            user_identifier=user.identifier,
            user_identifier_type=user.identifier_type,
            timestamp_ms=received,
            args=event.args,
            metadata=_with_signature(event),
        )
        await service.accept_events(state, log, project_id, [conversion])
        return "conversion"
    await log.publish(project_id, dump_records([_record(project_id, event, received, user, "")]))
    return "event"


def _with_signature(event: TrackingEvent) -> dict:
    """A conversion's metadata: as sent, with the event's signature fields (a conversion record has no columns of
    its own for them) where the metadata does not already hold those names."""
    signed = {
        "signature": event.signature,
        "signature_message": event.signature_message,
        "signature_public_key": event.signature_public_key,
        "account_chain_id": event.account_chain_id,
    }
    return {**{k: v for k, v in signed.items() if v is not None}, **event.metadata}


def _record(project_id: str, event: TrackingEvent, received: int, user: User | None, code: str) -> TrackingEventRecord:
    return TrackingEventRecord(
        project_id=project_id,
        id=tracking.event_id(event.sent, received),
        name=event.name,
        tracking_id=event.tracking_id,
        user_identifier="" if user is None else user.identifier,
        user_identifier_type="" if user is None else user.identifier_type,
        code=code,
        received_ms=received,
        args=event.args,
        metadata=event.metadata,
        signature=event.signature,
        signature_message=event.signature_message,
        signature_public_key=event.signature_public_key,
        account_chain_id=event.account_chain_id,
    )
