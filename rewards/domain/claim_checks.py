"""Claim checks (API.md §5): what a user is owed in an on-chain currency, and its life cycle.

One check per on-chain payout: `open` while it accrues (owed, not yet submitted for claiming),
`closed` once ready to claim on-chain, `claimed` when a chain indexer reports its transaction; `expired` when closed
under the project's `claim_check_expiry` and not claimed in that time (API.md §8: its amount returns to the budget).
"""

import hashlib
from dataclasses import dataclass, replace

from rewards.domain.errors import DomainError, ErrorKind
from rewards.domain.payout_config import TokenCurrency
from rewards.domain.payouts import Payout, User
from rewards.domain.timestamps import format_timestamp
from schemas.entities import CLAIM_CHECK
from schemas.records import ClaimCheckRecord

OPEN, CLOSED, CLAIMED, EXPIRED = "open", "closed", "claimed", "expired"
# API.md §9: a check of a project that requires acceptance waits in this state until its user accepts it (then open).
PENDING_ACCEPTANCE = "pending_acceptance"


class ClaimCheckError(DomainError):
    pass


class ClaimCheckNotFound(ClaimCheckError):
    kind = ErrorKind.NOT_FOUND


class ClaimCheckConflict(ClaimCheckError):
    kind = ErrorKind.CONFLICT


@dataclass(frozen=True)
class ClaimCheck:
    id: str
    user: User
    currency: TokenCurrency
    amount: int  # raw integer in the token's smallest unit
    reason: str
    status: str
    hash: str | None
    source_id: str  # the dedup_id of the event (or the code use) that paid it
    created_ms: int
    claimed_ms: int | None
    version: int  # 1 when opened, +1 on each change: the warehouse keeps the highest
    expires_ms: int | None = None  # closed under claim_check_expiry: when it expires (its forms' deadline)


def check_id(project_id: str, payout_id: str) -> str:
    """Stable across redeliveries of the same event, so a check is never created twice."""
    digest = hashlib.sha256(f"{project_id}\0{payout_id}".encode()).hexdigest()
    return f"cc_{digest[:32]}"


def opened(
    project_id: str, payout_id: str, source_id: str, payout: Payout, created_ms: int, status: str = OPEN
) -> ClaimCheck:
    """A new check (`status`: open, or pending_acceptance in a project that requires acceptance)."""
    reason = "affiliate_payout" if payout.role == "affiliate" else "end_user_payout"
    return ClaimCheck(
        id=check_id(project_id, payout_id),
        user=payout.recipient,
        currency=payout.currency,
        amount=int(payout.amount),
        reason=reason,
        status=status,
        hash=None,
        source_id=source_id,
        created_ms=created_ms,
        claimed_ms=None,
        version=1,
    )


def close(check: ClaimCheck, now_ms: int = 0, expiry_ms: int | None = None) -> ClaimCheck:
    """open → closed (expiring `expiry_ms` after `now_ms` when the project sets claim_check_expiry); closing a closed
    check again changes nothing; a claimed or expired one cannot close."""
    if check.status in (CLAIMED, EXPIRED):
        raise ClaimCheckConflict(f"claim check {check.id} is already {check.status}")
    if check.status == PENDING_ACCEPTANCE:
        raise ClaimCheckConflict(f"claim check {check.id} is not accepted by its user yet (API.md §9)")
    if check.status == CLOSED:
        return check
    expires_ms = None if expiry_ms is None else now_ms + expiry_ms
    return replace(check, status=CLOSED, version=check.version + 1, expires_ms=expires_ms)


def accept(check: ClaimCheck) -> ClaimCheck:
    """pending_acceptance → open; any other check is left as it is (accepted already, or never pending)."""
    if check.status != PENDING_ACCEPTANCE:
        return check
    return replace(check, status=OPEN, version=check.version + 1)


def expire(check: ClaimCheck, now_ms: int) -> ClaimCheck:
    """closed → expired once its time is past; any other check is left as it is (the sweep meets checks claimed or
    expired since it found them)."""
    if check.status != CLOSED or check.expires_ms is None or check.expires_ms > now_ms:
        return check
    return replace(check, status=EXPIRED, version=check.version + 1)


def claim(check: ClaimCheck, tx_hash: str, claimed_ms: int) -> ClaimCheck:
    """closed → claimed; the same hash again changes nothing; anything else is a conflict (an expired check among
    them: its forms' deadline is past, so no contract paid it)."""
    if check.status == CLAIMED:
        if check.hash == tx_hash:
            return check
        raise ClaimCheckConflict(f"claim check {check.id} is already claimed by another transaction")
    if check.status != CLOSED:
        raise ClaimCheckConflict(f"claim check {check.id} is {check.status}: only closed checks can be claimed")
    return replace(check, status=CLAIMED, hash=tx_hash, claimed_ms=claimed_ms, version=check.version + 1)


def record_fields(check: ClaimCheck) -> dict:
    """The check's fields as its record and its JSON answer name them (CLAIM_CHECK, schemas/entities.py), but the
    project's."""
    return {
        "id": check.id,
        "user_identifier": check.user.identifier,
        "user_identifier_type": check.user.identifier_type,
        "currency_address": check.currency.address,
        "currency_chain_id": check.currency.chain_id,
        "currency_name": check.currency.name,
        "currency_decimals": check.currency.decimals,
        "amount": str(check.amount),
        "reason": check.reason,
        "status": check.status,
        "hash": check.hash,
        "source_id": check.source_id,
        "created_at_ms": check.created_ms,
        "claimed_at_ms": check.claimed_ms,
        "version": check.version,
        "expires_at_ms": check.expires_ms,
    }


def to_record(project_id: str, check: ClaimCheck) -> ClaimCheckRecord:
    return ClaimCheckRecord.model_validate({"project_id": project_id, **record_fields(check)})


def from_record(record: ClaimCheckRecord) -> ClaimCheck:
    return ClaimCheck(
        id=record.id,
        user=User(record.user_identifier, record.user_identifier_type),
        currency=TokenCurrency(
            address=record.currency_address,
            chain_id=record.currency_chain_id,
            name=record.currency_name,
            decimals=record.currency_decimals,
        ),
        amount=int(record.amount),
        reason=record.reason,
        status=record.status,
        hash=record.hash,
        source_id=record.source_id,
        created_ms=record.created_at_ms,
        claimed_ms=record.claimed_at_ms,
        version=record.version,
        expires_ms=record.expires_at_ms,
    )


def currency_json(currency: TokenCurrency) -> dict:
    return {
        "currency_address": currency.address,
        "currency_chain_id": currency.chain_id,
        "currency_name": currency.name,
        "currency_decimals": currency.decimals,
    }


def check_json(check: ClaimCheck) -> dict:
    """A claim check as API.md §5 shows it."""
    return CLAIM_CHECK.answer(record_fields(check), format_timestamp)
