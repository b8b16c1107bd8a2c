"""The claim check reads' query values (API.md §5, §7), the body of POST /claim-checks/claim, and their answers' shapes:
totals folded per currency, a check as the published client's `ClaimCheckItem` (documented: rewards.web.answers)."""

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from query_api.claim_checks import service
from rewards.domain import claim_signing
from rewards.domain.claim_checks import CLAIMED, CLOSED, EXPIRED, OPEN, ClaimCheck, currency_json
from rewards.domain.timestamps import format_timestamp
from rewards.web.answers import (
    ALICE,
    CHECK_ID,
    TX_HASH,
    USDC,
    Answer,
    CheckCurrency,
    ClaimCheckAnswer,
    raw_amount,
    text,
    timestamp,
)

Status = Literal["claimed", "unclaimed", "open", "closed", "expired"]
Reason = Literal["affiliate_payout", "end_user_payout"]
UNCLAIMED = "unclaimed"
STATUSES_OF = {
    CLAIMED: (CLAIMED,), UNCLAIMED: (OPEN, CLOSED), OPEN: (OPEN,), CLOSED: (CLOSED,), EXPIRED: (EXPIRED,)
}  # fmt: skip


def fold_totals(totals: list[service.Total], status: str | None) -> dict:
    """Sums per currency: `claimed`, and `unclaimed` (open + closed, or only the status asked for)."""
    wanted = STATUSES_OF[status] if status else (CLAIMED, OPEN, CLOSED)
    unclaimed_label = status if status in (OPEN, CLOSED, EXPIRED) else UNCLAIMED
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
    seconds) of the form POST /claim-checks/claim answers for it now (its expiry, API.md §8, when the project's
    checks expire; else the forms' hourly deadline: a later call answers a later one); 0 for the others (open,
    claimed, expired, or not payable on-chain)."""
    signable = check.status == CLOSED and claim_signing.is_signable(check)
    return {
        "id": check.id,
        **currency_json(check.currency),
        "currency_chain_id": str(check.currency.chain_id),
        "reason": check.reason,
        "amount": str(check.amount),
        "status": check.status,
        "deadline_seconds": claim_signing.check_deadline(check, deadline) if signable else 0,
        "created_at": format_timestamp(check.created_ms),
    }


class ClaimableChecks(BaseModel):
    """The user, in camelCase as the published client's `getClaimableChecks` sends it, or snake_case."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"user_identifier": ALICE, "user_identifier_type": "evm_address"}]},
    )
    user_identifier: str = Field(validation_alias=AliasChoices("user_identifier", "userIdentifier"))
    user_identifier_type: str = Field(validation_alias=AliasChoices("user_identifier_type", "userIdentifierType"))


# -- the answers ----------------------------------------------------------------------------------------------------


class ClaimedRow(CheckCurrency):
    hash: str = text("The claim's transaction hash", TX_HASH)
    claimed_at: str = timestamp("The latest claim of this hash and currency")
    amount: str = raw_amount("The claimed checks' amounts of this currency under this hash, summed")


class ClaimHistory(Answer):
    results: list[ClaimedRow] = Field(description="One row per hash and currency, newest first")
    total_count: int = text("Rows in all", 1)
    next_page: int | None = text("The next page, null on the last", None)


class CurrencyTotal(CheckCurrency):
    amount: str = raw_amount("The sum")
    status: Literal["claimed", "unclaimed", "open", "closed", "expired"] = text(
        "`claimed`; `unclaimed` (open and closed), or the status asked for", "unclaimed"
    )


class CurrencyDebt(CheckCurrency):
    amount: str = raw_amount("Raw units owed")


class CheckTotals(Answer):
    claimed: list[CurrencyTotal] = Field(description="Claimed amounts, per currency")
    unclaimed: list[CurrencyTotal] = Field(description="Open and closed amounts (or those of the status asked)")
    debt: list[CurrencyDebt] = Field(
        description="What the user owes per currency (API.md §9): a reversal's part that a closed or claimed check "
        "could not give back, taken from the user's next checks in that currency first"
    )


class CheckPage(Answer):
    results: list[ClaimCheckAnswer] = Field(description="The project's checks, newest first")
    total_count: int = text("Checks in all", 1)
    next_page: int | None = text("The next page, null on the last", None)


class ClaimCheckItem(Answer):
    """A check as the published client's `ClaimCheckItem` declares it."""

    id: str = text("The check's id", CHECK_ID)
    currency_address: str = text("The token's address", USDC)
    currency_chain_id: str = text("The chain's id, as a string", "1")
    currency_name: str = text("The token's name", "USDC")
    currency_decimals: int = text("The token's decimals", 6)
    reason: Reason = text("Why it is owed", "affiliate_payout")
    amount: str = raw_amount("The amount")
    status: Literal["open", "closed", "claimed", "expired"] = text("Its status", "closed")
    deadline_seconds: int = text("For a closed check an EVM contract can pay, its form's deadline; else 0", 1764068400)
    created_at: str = timestamp("When its first payout's event happened")


class UserChecks(Answer):
    claim_checks: list[ClaimCheckItem] = Field(description="The user's checks, newest first (at most 1,000)")


class PendingAcceptance(Answer):
    pending: bool = text("Whether any of the user's token payouts waits for its acceptance", True)
    payouts: list[ClaimCheckAnswer] = Field(
        description="Its claim checks waiting (`pending_acceptance`), newest first: accepted, they are open"
    )
