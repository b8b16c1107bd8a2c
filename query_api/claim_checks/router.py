"""GET /claim-checks/claim-history, /claim-checks/totals, /claim-checks/rewards-payouts (API.md §5); GET /claim-checks
and POST /claim-checks/claim (§7: the published client's getClaimChecks and getClaimableChecks)."""

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from query_api.claim_checks import service
from rewards.domain import claim_signing
from rewards.domain.claim_checks import CLAIMED, CLOSED, OPEN, ClaimCheck, check_json, currency_json
from rewards.domain.timestamps import format_timestamp, now_ms
from rewards.ports import Principal
from rewards.web.auth import guard
from rewards.web.backends import backends_of
from rewards.web.bounds import time_bound
from rewards.web.errors import bad_request
from rewards.web.openapi import request_body_doc
from rewards.web.requests import PageParams, parse_user, request_fields

router = APIRouter(prefix="/claim-checks", tags=["claim checks"])

Status = Literal["claimed", "unclaimed", "open", "closed"]
Reason = Literal["affiliate_payout", "end_user_payout"]
UNCLAIMED = "unclaimed"
STATUSES_OF = {CLAIMED: (CLAIMED,), UNCLAIMED: (OPEN, CLOSED), OPEN: (OPEN,), CLOSED: (CLOSED,)}


@router.get("/claim-history")
async def claim_history(
    request: Request,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    page=PageParams,
    principal: Principal = Depends(guard(None, "claim_history")),
):
    user = parse_user(user_identifier, user_identifier_type)
    rows, total = await service.claim_history(
        backends_of(request).warehouse, principal.project_id, user, page.offset, page.size
    )
    results = [
        {"hash": row.hash, "claimed_at": format_timestamp(row.claimed_ms), **currency_json(row.currency),
         "amount": str(row.amount)}
        for row in rows
    ]  # fmt: skip
    return {"results": results, "total_count": total, "next_page": page.next_page(total)}


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


@router.get("/totals")
async def totals(
    request: Request,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    status: Status | None = None,
    reason: Reason | None = None,
    principal: Principal = Depends(guard(None)),
):
    user = parse_user(user_identifier, user_identifier_type)
    rows = await service.totals(backends_of(request).warehouse, principal.project_id, user, reason)
    return fold_totals(rows, status)


@router.get("/rewards-payouts")
async def rewards_payouts(
    request: Request,
    status: Status | None = None,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    currency_address: str | None = Query(None, min_length=1, max_length=128),
    start: str | None = Query(None, alias="from"),
    end: str | None = Query(None, alias="to"),
    page=PageParams,
    principal: Principal = Depends(guard("service_role")),
):
    user = None
    if user_identifier is not None or user_identifier_type is not None:
        user = parse_user(user_identifier, user_identifier_type)
    where = service.ChecksFilter(
        statuses=STATUSES_OF[status] if status else None,
        user=user,
        currency_address=currency_address,
        start_ms=time_bound("from", start),
        end_ms=time_bound("to", end, end=True),
    )
    if where.start_ms is not None and where.end_ms is not None and where.start_ms > where.end_ms:
        raise bad_request("from must not be after to")
    checks, total = await service.project_checks(
        backends_of(request).warehouse, principal.project_id, where, page.offset, page.size
    )
    return {"results": [check_json(c) for c in checks], "total_count": total, "next_page": page.next_page(total)}


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


@router.get("")
async def user_checks(
    request: Request,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    status: Status | None = None,
    principal: Principal = Depends(guard(None)),
):
    """The user's checks, newest first: `{"claim_checks": [...]}`, at most the newest 1,000 (no pages: the published
    client asks for none). `status`: `open`, `closed`, `unclaimed` (open or closed) or `claimed`."""
    user = parse_user(user_identifier, user_identifier_type)
    statuses = STATUSES_OF[status] if status else None
    checks = await service.user_checks(backends_of(request).warehouse, principal.project_id, user, statuses)
    deadline = claim_signing.form_deadline(now_ms())
    return {"claim_checks": [check_item(check, deadline) for check in checks]}


class ClaimableChecks(BaseModel):
    """The user, in camelCase as the published client's `getClaimableChecks` sends it, or snake_case."""

    model_config = ConfigDict(extra="forbid")
    user_identifier: str = Field(validation_alias=AliasChoices("user_identifier", "userIdentifier"))
    user_identifier_type: str = Field(validation_alias=AliasChoices("user_identifier_type", "userIdentifierType"))


FORM_RESPONSES = {
    409: {"description": "Conflict: the project has no claim signer (`claim signer not configured`)"},
}


@router.post(
    "/claim", openapi_extra=request_body_doc(ClaimableChecks, required=False, query=True), responses=FORM_RESPONSES
)
async def claimable_checks(request: Request, principal: Principal = Depends(guard(None, "claim_forms"))):
    """A read done by POST: the user's claimable checks (closed, payable by an EVM contract; among the newest 1,000),
    each as the signed claim form an on-chain claim needs (the published client's `ClaimResponse`; README "Signed
    claim checks")."""
    fields: ClaimableChecks = await request_fields(request, ClaimableChecks)
    user = parse_user(fields.user_identifier, fields.user_identifier_type)
    backends = backends_of(request)
    return await service.claim_forms(
        backends.state, backends.warehouse, principal.project_id, user, backends.settings.secrets_keys, now_ms()
    )
