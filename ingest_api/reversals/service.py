"""Reversals (API.md §9): an event's payouts taken back in part or whole. Knows nothing of HTTP.

Every named event must be accepted already (else nothing is applied: 404 naming it); the state store settles the
request's reversals against each event's reversed share, all or none, and their records reach the log with the
change (rewards.ports.ReversalStore); the workers then take back each payout's part (stream_workers/handlers/
reversal.py)."""

from collections.abc import Sequence

from prometheus_client import Counter

from rewards.domain.errors import DomainError, ErrorKind
from rewards.domain.reversals import Reversal
from rewards.ports import EventLog, StateStore

REVERSED = Counter("rewards_reversals_total", "Reversals newly applied")


class EventsNotFound(DomainError):
    kind = ErrorKind.NOT_FOUND

    def __init__(self, dedup_ids: list[str]):
        super().__init__("; ".join(self.messages(dedup_ids)))
        self.dedup_ids = dedup_ids

    @staticmethod
    def messages(dedup_ids: list[str]) -> list[str]:
        return [f"event {dedup_id} not found (unknown, or not accepted yet)" for dedup_id in dedup_ids]


async def reverse(state: StateStore, log: EventLog, project_id: str, reversals: Sequence[Reversal], now: int) -> int:
    """Apply the reversals, all or none; returns how many were newly applied."""
    events = list(dict.fromkeys(r.dedup_id for r in reversals))
    unknown = [dedup_id for dedup_id in events if await state.event_status(project_id, dedup_id) is None]
    if unknown:
        raise EventsNotFound(unknown)
    async with state.reverse(project_id, reversals, now) as change:
        if change.payload is not None:
            await log.publish(project_id, change.payload)
    REVERSED.inc(change.value)
    return change.value
