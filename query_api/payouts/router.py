"""GET /payouts/summary, /payouts/totals/{user}, /payouts/leaderboard/{payouts,users} (API.md §1)."""

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request

from query_api.payouts import service
from rewards.domain.amounts import exact_sum, format_amount
from rewards.domain.timestamps import InvalidTimestamp, parse_timestamp_ms
from rewards.ports import Principal
from rewards.web.errors import bad_request
from rewards.web.http import PageParams, backends_of, guard, parse_user

router = APIRouter(prefix="/payouts", tags=["payouts"])


@router.get("/summary")
async def summary(
    request: Request,
    currency: Literal["point"] = Query(...),
    principal: Principal = Depends(guard(None, "payouts_summary")),
):
    total = await service.project_total(backends_of(request).warehouse, principal.project_id)
    return {"total_payouts": format_amount(total)}


@router.get("/totals/{user_identifier:any_text}")  # an email may hold a `/` (sent as %2F): rewards.web.http
async def totals(
    request: Request,
    user_identifier: str,
    identifier_type: str | None = None,
    user_identifier_type: str | None = None,
    principal: Principal = Depends(guard(None)),
):
    user = parse_user(user_identifier, identifier_type or user_identifier_type)
    by_kind = await service.user_totals(backends_of(request).warehouse, principal.project_id, user)
    return {
        "user_identifier": user.identifier,
        "user_identifier_type": user.identifier_type,
        "total_points": format_amount(exact_sum(by_kind.values())),
        "by_kind": {kind: format_amount(amount) for kind, amount in by_kind.items()},
    }


def _window(start: str | None, end: str | None) -> tuple[int | None, int | None]:
    try:
        bounds = tuple(None if v is None else parse_timestamp_ms(v) for v in (start, end))
    except InvalidTimestamp as exc:
        raise bad_request(f"from and to {exc}") from exc
    if None not in bounds and bounds[0] > bounds[1]:
        raise bad_request("from must not be after to")
    return bounds


class LeaderboardQuery:
    """The query of both leaderboards; `user_identifier_type` is another name of `identifier_type`."""

    def __init__(
        self,
        page=PageParams,
        start: str | None = Query(None, alias="from"),
        end: str | None = Query(None, alias="to"),
        user_identifier: str | None = None,
        identifier_type: str | None = None,
        user_identifier_type: str | None = None,
    ):
        self.page = page
        self.window = _window(start, end)
        self.user = None
        kind = identifier_type or user_identifier_type
        if user_identifier is not None or kind is not None:
            self.user = parse_user(user_identifier, kind)


async def _leaderboard(request: Request, principal: Principal, role: str, query: LeaderboardQuery) -> dict:
    page = query.page
    rows, count = await service.leaderboard(
        backends_of(request).warehouse, principal.project_id, role, query.window, page.offset, page.size, query.user
    )
    return {
        "total_results": count,
        "page": page.page,
        "page_size": page.size,
        "results": [
            {
                "rank": row.rank,
                "user_identifier": row.user.identifier,
                "user_identifier_type": row.user.identifier_type,
                "address": row.user.identifier,
                "total_amount": format_amount(row.total),
                "total_attributions": row.attributions,
            }
            for row in rows
        ],
    }


@router.get("/leaderboard/payouts")
async def affiliates_leaderboard(
    request: Request, principal: Principal = Depends(guard(None)), query: LeaderboardQuery = Depends()
):
    """Affiliates ranked by the points earned as affiliates (commissions and referral rewards)."""
    return await _leaderboard(request, principal, "affiliate", query)


@router.get("/leaderboard/users")
async def users_leaderboard(
    request: Request, principal: Principal = Depends(guard(None)), query: LeaderboardQuery = Depends()
):
    """End users ranked by the points earned as users (end-user rewards, campaign bonuses)."""
    return await _leaderboard(request, principal, "user", query)
