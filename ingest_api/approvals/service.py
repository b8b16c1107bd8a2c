"""Deciding payouts held for approval (API.md §9): each exactly once, all of a request or none. Knows nothing of
HTTP."""

from collections.abc import Sequence

from prometheus_client import Counter

from rewards.ports import ApprovalStore, EventLog

DECIDED = Counter("rewards_payout_decisions_total", "Payouts held for approval, decided", ["decision"])


async def decide(
    state: ApprovalStore, log: EventLog, project_id: str, payout_ids: Sequence[str], decision: str,
    reason: str | None, now: int,
) -> int:  # fmt: skip
    """Decide the payouts (NotPending names one that is not held: nothing is decided); how many were."""
    async with state.decide_payouts(project_id, payout_ids, decision, reason, now) as change:
        if change.payload is not None:
            await log.publish(project_id, change.payload)
    DECIDED.labels(decision).inc(change.value)
    return change.value
