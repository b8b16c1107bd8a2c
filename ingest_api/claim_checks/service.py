"""The writes of the claim check life cycle (API.md §5): closing a user's checks (answering their signed claim forms,
§7), recording their claims.

The state store changes the checks atomically (all listed ids or none), with the records of their new states,
published in its block so the workers bring the warehouse's read model up to date (the production store relays
them itself if this process dies first). A retry publishes the current states again."""

import asyncio
from collections.abc import Callable, Sequence
from functools import partial
from typing import Protocol

from rewards.domain import claim_checks, claim_signing
from rewards.domain.claim_checks import ClaimCheck
from rewards.domain.payouts import User
from rewards.ports import ClaimCheckStore, EventLog, ProjectStore


class SigningStore(ClaimCheckStore, ProjectStore, Protocol):
    """What closing with signed forms reads and changes: the checks, and the project's signer and configuration."""


async def close_signed(
    state: SigningStore,
    log: EventLog,
    project_id: str,
    owner: User,
    ids: Sequence[str],
    secrets_keys: Sequence[str],
    now_ms: int,
) -> list[dict]:
    """The owner's open checks become `closed` (closing a closed check again is a no-op); answers a claim form for each
    listed check (API.md §7), signed when an EVM contract can pay it. A project without a claim signer closes as
    API.md §5 has it, answering the checks: its claims go on through POST /claim-checks/claims."""
    stored = await state.get_claim_signer(project_id)
    config = await state.get_config(project_id)
    close = partial(claim_checks.close, now_ms=now_ms, expiry_ms=config.claim_check_expiry_ms)
    if stored is None:
        return [claim_checks.check_json(check) for check in await _change(state, log, project_id, ids, close, owner)]
    signer = claim_signing.open_signer(stored, secrets_keys)
    closed = await _change(state, log, project_id, ids, close, owner)
    # Signed once the change is made (the checks are closed whatever happens next), off the event loop: ~0.5 ms each.
    return await asyncio.to_thread(claim_signing.claim_forms, closed, signer, config.claim_contract_address, now_ms)


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
