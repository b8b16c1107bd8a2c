"""The writes of the claim check life cycle (API.md §5): closing a user's checks, recording their claims.

The state store changes the checks atomically (all listed ids or none), with the records of their new states,
published in its block so the workers bring the warehouse's read model up to date (the production store relays
them itself if this process dies first). A retry publishes the current states again."""

from collections.abc import Callable, Sequence
from functools import partial

from rewards.domain import claim_checks
from rewards.domain.claim_checks import ClaimCheck
from rewards.domain.payouts import User
from rewards.ports import ClaimCheckStore, EventLog


async def close(
    state: ClaimCheckStore, log: EventLog, project_id: str, owner: User, ids: Sequence[str]
) -> list[ClaimCheck]:
    """The owner's open checks become `closed`; closing a closed check again is a no-op."""
    return await _change(state, log, project_id, ids, claim_checks.close, owner)


async def record_claims(
    state: ClaimCheckStore, log: EventLog, project_id: str, tx_hash: str, claimed_ms: int, ids: Sequence[str]
) -> int:
    """Closed checks become `claimed` by a transaction; the same hash and ids again is a no-op. Returns the number
    of listed checks now claimed by this hash, so a retry answers as the first call."""
    change = partial(claim_checks.claim, tx_hash=tx_hash, claimed_ms=claimed_ms)
    return len(await _change(state, log, project_id, ids, change, None))


async def _change(
    state: ClaimCheckStore,
    log: EventLog,
    project_id: str,
    ids: Sequence[str],
    change: Callable[[ClaimCheck], ClaimCheck],
    owner: User | None,
) -> list[ClaimCheck]:
    ids = list(dict.fromkeys(ids))  # an id listed twice is one check
    async with state.update_claim_checks(project_id, ids, change, owner) as changed:
        await log.publish(project_id, changed.payload)
    return changed.value
