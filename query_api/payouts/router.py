"""GET /payouts/summary and /payouts/totals/{user} (API.md §1; its leaderboards: query_api.leaderboards)."""

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query

from query_api.payouts import service
from query_api.payouts.schemas import Summary, UserTotals
from rewards.domain.amounts import exact_sum, format_amount
from rewards.ports import Principal
from rewards.web.auth import guard
from rewards.web.dependencies import Caller, WarehouseDep
from rewards.web.openapi import success
from rewards.web.requests import parse_user

router = APIRouter(prefix="/payouts", tags=["payouts"])

SummaryReader = Annotated[Principal, Depends(guard(None, "payouts_summary"))]


@router.get("/summary", responses=success(Summary, "The project's points paid, all time"))
async def summary(
    principal: SummaryReader,
    warehouse: WarehouseDep,
    currency: Literal["point"] = Query(..., description="Required; `point`, the only currency summed"),
):
    total = await service.project_total(warehouse, principal.project_id)
    return {"total_payouts": format_amount(total)}


@router.get(
    "/totals/{user_identifier:any_text}", responses=success(UserTotals, "The user's points, in all and per kind")
)  # an email may hold a `/` (sent as %2F): rewards.web.requests.AnyText
async def totals(
    principal: Caller,
    warehouse: WarehouseDep,
    user_identifier: str,
    identifier_type: str | None = None,
    user_identifier_type: str | None = None,
):
    user = parse_user(user_identifier, identifier_type or user_identifier_type)
    by_kind = await service.user_totals(warehouse, principal.project_id, user)
    return {
        "user_identifier": user.identifier,
        "user_identifier_type": user.identifier_type,
        "total_points": format_amount(exact_sum(by_kind.values())),
        "by_kind": {kind: format_amount(amount) for kind, amount in by_kind.items()},
    }
