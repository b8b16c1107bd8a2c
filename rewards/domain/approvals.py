"""Approvals (API.md §9, the hosted service's Pending Approval mode): payouts that wait for an operator's decision.

A payout the configuration's `approval` holds (its currency listed, its amount above `above`) is neither paid nor
refused when its event is processed: it waits, in no total, until an operator approves it (then it is paid as if its
event had just been processed: caps, budgets and claim checks alike) or rejects it (`rejected_by_operator`). Each is
decided exactly once: the state store holds the waiting ones, and a decision takes them, all of a request or none."""

import uuid
from collections.abc import Sequence

from rewards.domain.allotment import currency_key
from rewards.domain.errors import DomainError, ErrorKind
from rewards.domain.integrity import Rejection
from rewards.domain.payout_config import Approval
from rewards.domain.payouts import Payout
from schemas.records import PayoutDecisionRecord

HELD = "pending_approval"  # the verdict of a payout held for approval (beside rewards.domain.integrity.Rejection)
APPROVED, REJECTED = "approved", "rejected"
MAX_DECISIONS = 100  # payouts decided per request
MAX_REASON_LENGTH = 1000


class NotPending(DomainError):
    """A payout that is not waiting for a decision (unknown, or decided already): 409 naming it."""

    kind = ErrorKind.CONFLICT

    def __init__(self, payout_id: str):
        super().__init__(f"payout {payout_id} is not pending approval")
        self.payout_id = payout_id


def decision_record(
    project_id: str, payout_id: str, decision: str, reason: str | None, decided_at_ms: int, payout: dict
) -> PayoutDecisionRecord:
    """The record of a decision on a held payout (`payout`: its row as held), with an id of its own."""
    return PayoutDecisionRecord(
        project_id=project_id, id=uuid.uuid4().hex, payout_id=payout_id, decision=decision, reason=reason,
        decided_at_ms=decided_at_ms, payout=payout,
    )  # fmt: skip


def held(
    payouts: Sequence[Payout], verdicts: list[Rejection | str | None] | None, approval: Approval | None
) -> list[Rejection | str | None] | None:
    """The verdicts with HELD for each payout not refused that `approval` holds (None: nothing refused or held)."""
    if approval is None:
        return verdicts
    marks = [approval.holds(currency_key(p.currency), p.amount) for p in payouts]
    if not any(marks):
        return verdicts
    found = list(verdicts) if verdicts is not None else [None] * len(payouts)
    return [HELD if mark and verdict is None else verdict for mark, verdict in zip(marks, found, strict=True)]
