"""Accepting events (dedup, atomic publication, idempotent retries) and their status. Knows nothing of HTTP."""

import hashlib
import uuid

import orjson
from prometheus_client import Counter

from ingest_api.events.schemas import ValidEvent
from rewards.domain.errors import DomainError
from rewards.domain.payouts import Rules, User
from rewards.domain.timestamps import now_ms
from rewards.ports import EventLog, IngestStore, StateStore, Unavailable
from rewards.stages import PUBLISHED, reached
from rewards.web.backpressure import Backpressure
from schemas.records import dump_conversions
from schemas.topics import shard_of

INGESTED = Counter("rewards_ingested_events_total", "Events accepted (duplicates excluded)")
DUPLICATES = Counter("rewards_duplicate_events_total", "Events ignored as already known")


class NotAccepted(Unavailable):
    """Any failure but the log's while accepting a batch: nothing was accepted (API.md §3: 503)."""

    answer = "Service Unavailable: the events were not accepted, retry later"


def unique_by_dedup_id(events: list[ValidEvent]) -> list[ValidEvent]:
    """A dedup_id appearing twice inside one batch counts once: the first occurrence wins."""
    seen: set[str] = set()
    unique = []
    for event in events:
        if event.dedup_id not in seen:
            seen.add(event.dedup_id)
            unique.append(event)
    return unique


async def accept(
    state: IngestStore,
    log: EventLog,
    backpressure: Backpressure | None,
    project_id: str,
    events: list[ValidEvent],
    idempotency: tuple[str, bytes] | None = None,
) -> tuple[int, bytes | None]:
    """accept_events, unless the pipeline is too far behind (Backlogged). Whatever fails but the log or a domain rule
    raises NotAccepted: the claim rolled back (or, in the production shape, some of the batch's ids are being
    accepted by another request still in flight)."""
    if backpressure is not None:
        await backpressure.admit()
    try:
        return await accept_events(state, log, project_id, events, idempotency)
    except (DomainError, Unavailable):
        raise
    except Exception as exc:
        raise NotAccepted(str(exc)) from exc


async def event_status(state: StateStore, project_id: str, dedup_id: str) -> str:
    """accepted | processed | failed | not_found; `reversed` once its reversals sum to 1, `partially_reversed` while
    they sum to less (API.md §9: as soon as they are accepted)."""
    status = await state.event_status(project_id, dedup_id)
    if status is None:
        return "not_found"
    share = (await state.reversed_shares(project_id, [dedup_id])).get(dedup_id)
    if share is None or share <= 0:
        return status
    return "reversed" if share >= 1 else "partially_reversed"


async def user_event_status(state: StateStore, project_id: str, user: User, name: str) -> dict:
    """Whether the user has an event of this name (`created`), and whether the payout configuration names it (`paid`):
    an event of a name it does not is accepted and recorded, and pays nothing, so a misspelt name shows here."""
    paid = Rules(await state.get_config(project_id)).names(name)
    return {"created": await state.has_event(project_id, user, name), "paid": paid}


async def accept_events(
    state: IngestStore,
    log: EventLog,
    project_id: str,
    events: list[ValidEvent],
    idempotency: tuple[str, bytes] | None = None,
) -> tuple[int, bytes | None]:
    """Accept the new events of a batch, all or none. Returns (accepted count, replayed response)."""
    events = unique_by_dedup_id(events)
    received = now_ms()
    batch_id = uuid.uuid4().hex
    users_and_names = [(User(e.user_identifier, e.user_identifier_type), e.name) for e in events]
    key = None if idempotency is None else (idempotency[0], hashlib.sha256(idempotency[1]).hexdigest())
    async with state.ingest(project_id, [e.dedup_id for e in events], users_and_names, key) as claim:
        if claim.replay is not None:
            return -1, claim.replay
        fresh = [events[i] for i in claim.fresh]
        if fresh:
            await _publish(log, project_id, batch_id, received, fresh)
            reached(PUBLISHED, received)
        claim.respond(orjson.dumps({"ingested_events": len(fresh)}))
    INGESTED.inc(len(fresh))
    DUPLICATES.inc(len(events) - len(fresh))
    return len(fresh), None


async def _publish(log: EventLog, project_id: str, batch_id: str, received: int, events: list[ValidEvent]) -> None:
    """The batch's conversions in one message, or, where the log spreads a project's conversions, one per partition
    they go to by user (schemas.topics), in one transaction."""
    if log.shards <= 1:
        await log.publish(project_id, dump_conversions(project_id, batch_id, received, events))
        return
    parts = spread(project_id, events, log.shards)
    await log.publish_shards(
        project_id, {shard: dump_conversions(project_id, batch_id, received, part) for shard, part in parts.items()}
    )


def spread(project_id: str, events: list[ValidEvent], shards: int) -> dict[int, list[ValidEvent]]:
    """The events by the shard of their user (schemas.topics.shard_of), each shard's in the batch's order."""
    of_user: dict[tuple[str, str], int] = {}  # each user's shard, hashed once
    parts: dict[int, list[ValidEvent]] = {}
    for event in events:
        user = event.user_identifier_type, event.user_identifier
        if (shard := of_user.get(user)) is None:
            shard = of_user[user] = shard_of(project_id, *user, shards)
        parts.setdefault(shard, []).append(event)
    return parts
