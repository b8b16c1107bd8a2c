"""Accepting events: dedup, atomic publication, idempotent retries. Knows nothing of HTTP."""

import hashlib
import uuid

import orjson
from prometheus_client import Counter

from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import EventLog, StateStore
from schemas.events import ValidEvent
from schemas.records import dump_conversions

INGESTED = Counter("rewards_ingested_events_total", "Events accepted (duplicates excluded)")
DUPLICATES = Counter("rewards_duplicate_events_total", "Events ignored as already known")


def unique_by_dedup_id(events: list[ValidEvent]) -> list[ValidEvent]:
    """A dedup_id appearing twice inside one batch counts once: the first occurrence wins."""
    seen: set[str] = set()
    unique = []
    for event in events:
        if event.dedup_id not in seen:
            seen.add(event.dedup_id)
            unique.append(event)
    return unique


async def accept_events(
    state: StateStore,
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
            await log.publish(project_id, dump_conversions(project_id, batch_id, received, fresh))
        claim.respond(orjson.dumps({"ingested_events": len(fresh)}))
    INGESTED.inc(len(fresh))
    DUPLICATES.inc(len(events) - len(fresh))
    return len(fresh), None
