"""The claim check reads' query values (API.md §5, §7), the body of POST /claim-checks/claim, and their answers' shapes:
totals folded per currency, a check as the published client's `ClaimCheckItem`."""

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from query_api.claim_checks import service
from rewards.domain import claim_signing
from rewards.domain.claim_checks import CLAIMED, CLOSED, OPEN, ClaimCheck, currency_json
from rewards.domain.timestamps import format_timestamp

Status = Literal["claimed", "unclaimed", "open", "closed"]
Reason = Literal["affiliate_payout", "end_user_payout"]
UNCLAIMED = "unclaimed"
STATUSES_OF = {CLAIMED: (CLAIMED,), UNCLAIMED: (OPEN, CLOSED), OPEN: (OPEN,), CLOSED: (CLOSED,)}


def fold_totals(totals: list[service.Total], status: str | None) -> dict:
    """Sums per currency: `claimed`, and `unclaimed` (open + closed, or only the status asked for)."""
    wanted = STATUSES_OF[status] if status else (CLAIMED, OPEN, CLOSED)
    unclaimed_label = status if status in (OPEN, CLOSED) else UNCLAIMED
    folded: dict[str, dict[tuple, dict]] = {CLAIMED: {}, UNCLAIMED: {}}
    for total in totals:
        if total.status not in wanted:
            continue
        group, label = (CLAIMED, CLAIMED) if total.status == CLAIMED else (UNCLAIMED, unclaimed_label)
        key = (total.currency.chain_id, total.currency.address)
        entry = folded[group].setdefault(key, {**currency_json(total.currency), "amount": 0, "status": label})
        entry["amount"] += total.amount
    return {group: [{**e, "amount": str(e["amount"])} for e in entries.values()] for group, entries in folded.items()}


def check_item(check: ClaimCheck, deadline: int) -> dict:
    """A check as the published client's `ClaimCheckItem` declares it: `currency_chain_id` a string, `currency_decimals`
    and `deadline_seconds` numbers. `deadline_seconds`: for a closed check an EVM contract can pay, the deadline (unix
    seconds) of the form POST /claim-checks/claim answers for it now (closed checks never expire: a later call answers
    a later deadline); 0 for the others (open, claimed, or not payable on-chain)."""
    signable = check.status == CLOSED and claim_signing.is_signable(check)
    return {
        "id": check.id,
        **currency_json(check.currency),
        "currency_chain_id": str(check.currency.chain_id),
        "reason": check.reason,
        "amount": str(check.amount),
        "status": check.status,
        "deadline_seconds": deadline if signable else 0,
        "created_at": format_timestamp(check.created_ms),
    }


class ClaimableChecks(BaseModel):
    """The user, in camelCase as the published client's `getClaimableChecks` sends it, or snake_case."""

    model_config = ConfigDict(extra="forbid")
    user_identifier: str = Field(validation_alias=AliasChoices("user_identifier", "userIdentifier"))
    user_identifier_type: str = Field(validation_alias=AliasChoices("user_identifier_type", "userIdentifierType"))
