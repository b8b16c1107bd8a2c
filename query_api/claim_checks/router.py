"""GET /claim-checks/claim-history, /claim-checks/totals, /claim-checks/rewards-payouts (API.md §5); GET /claim-checks
and POST /claim-checks/claim (§7: the published client's getClaimChecks and getClaimableChecks)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from query_api.claim_checks import service
from query_api.claim_checks.schemas import (
    STATUSES_OF,
    CheckPage,
    CheckTotals,
    ClaimableChecks,
    ClaimHistory,
    PendingAcceptance,
    Reason,
    Status,
    UserChecks,
    check_item,
    fold_totals,
)
from rewards.domain import claim_signing
from rewards.domain.claim_checks import PENDING_ACCEPTANCE, check_json, currency_json
from rewards.domain.timestamps import format_timestamp, now_ms
from rewards.ports import Principal
from rewards.web.answers import ClaimForm
from rewards.web.auth import guard
from rewards.web.bounds import time_bound
from rewards.web.dependencies import Caller, ServiceCaller, SettingsDep, StateDep, WarehouseDep
from rewards.web.errors import bad_request
from rewards.web.openapi import request_body_doc, success
from rewards.web.requests import PageParams, parse_user, request_fields

router = APIRouter(prefix="/claim-checks", tags=["claim checks"])
pending = APIRouter(prefix="/payouts/pending-acceptance", tags=["payouts"])

HistoryReader = Annotated[Principal, Depends(guard(None, "claim_history"))]
FormsReader = Annotated[Principal, Depends(guard(None, "claim_forms"))]


@router.get("/claim-history", responses=success(ClaimHistory, "A page of the user's claims"))
async def claim_history(
    principal: HistoryReader,
    warehouse: WarehouseDep,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    page=PageParams,
):
    user = parse_user(user_identifier, user_identifier_type)
    rows, total = await service.claim_history(warehouse, principal.project_id, user, page.offset, page.size)
    results = [
        {"hash": row.hash, "claimed_at": format_timestamp(row.claimed_ms), **currency_json(row.currency),
         "amount": str(row.amount)}
        for row in rows
    ]  # fmt: skip
    return {"results": results, "total_count": total, "next_page": page.next_page(total)}


@router.get("/totals", responses=success(CheckTotals, "The user's amounts per currency"))
async def totals(
    principal: Caller,
    warehouse: WarehouseDep,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    status: Status | None = None,
    reason: Reason | None = None,
):
    user = parse_user(user_identifier, user_identifier_type)
    rows = await service.totals(warehouse, principal.project_id, user, reason)
    owed = await service.debts(warehouse, principal.project_id, user)
    return {**fold_totals(rows, status), "debt": [{**currency_json(t.currency), "amount": str(t.amount)} for t in owed]}


@pending.get("", responses=success(PendingAcceptance, "The user's token payouts waiting for its acceptance"))
async def pending_acceptance(
    principal: Caller,
    warehouse: WarehouseDep,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
):
    """The user's claim checks waiting for its acceptance (API.md §9, `require_acceptance`), newest first: POST
    /payouts/pending-acceptance/accept with its signature opens them."""
    user = parse_user(user_identifier, user_identifier_type)
    checks = await service.user_checks(warehouse, principal.project_id, user, (PENDING_ACCEPTANCE,))
    return {"pending": bool(checks), "payouts": [check_json(check) for check in checks]}


@router.get("/rewards-payouts", responses=success(CheckPage, "A page of the project's claim checks"))
async def rewards_payouts(
    principal: ServiceCaller,
    warehouse: WarehouseDep,
    status: Status | None = None,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    currency_address: str | None = Query(None, min_length=1, max_length=128),
    start: str | None = Query(None, alias="from"),
    end: str | None = Query(None, alias="to"),
    page=PageParams,
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
    checks, total = await service.project_checks(warehouse, principal.project_id, where, page.offset, page.size)
    return {"results": [check_json(c) for c in checks], "total_count": total, "next_page": page.next_page(total)}


@router.get("", responses=success(UserChecks, "The user's checks"))
async def user_checks(
    principal: Caller,
    warehouse: WarehouseDep,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    status: Status | None = None,
):
    """The user's checks, newest first: `{"claim_checks": [...]}`, at most the newest 1,000 (no pages: the published
    client asks for none). `status`: `open`, `closed`, `unclaimed` (open or closed) or `claimed`."""
    user = parse_user(user_identifier, user_identifier_type)
    statuses = STATUSES_OF[status] if status else None
    checks = await service.user_checks(warehouse, principal.project_id, user, statuses)
    deadline = claim_signing.form_deadline(now_ms())
    return {"claim_checks": [check_item(check, deadline) for check in checks]}


FORM_RESPONSES = {
    **success(list[ClaimForm], "A signed claim form per claimable check"),
    409: {"description": "Conflict: the project has no claim signer (`claim signer not configured`)"},
}


@router.post(
    "/claim", openapi_extra=request_body_doc(ClaimableChecks, required=False, query=True), responses=FORM_RESPONSES
)
async def claimable_checks(
    request: Request, principal: FormsReader, state: StateDep, warehouse: WarehouseDep, settings: SettingsDep
):
    """A read done by POST: the user's claimable checks (closed, payable by an EVM contract; among the newest 1,000),
    each as the signed claim form an on-chain claim needs (the published client's `ClaimResponse`;
    docs/security.md, "Signed claim checks")."""
    fields: ClaimableChecks = await request_fields(request, ClaimableChecks)
    user = parse_user(fields.user_identifier, fields.user_identifier_type)
    return await service.claim_forms(state, warehouse, principal.project_id, user, settings.secrets_keys, now_ms())
