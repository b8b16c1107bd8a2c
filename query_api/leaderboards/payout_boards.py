"""GET /payouts/leaderboard/payouts and /payouts/leaderboard/users (API.md §1, as the published client reads them)."""

from fastapi import APIRouter, Depends, Query, Request

from query_api.leaderboards import payout_boards_service as service
from query_api.leaderboards.board import (
    FIGURE_FIELDS,
    OPTIONAL_FIELDS,
    UserType,
    answer,
    board_user,
    calculated_at,
    optional_fields,
    parse_currency,
    parse_fields,
)
from query_api.leaderboards.service import UserFigures, figures_of
from rewards.domain.amounts import format_amount
from rewards.domain.payouts import User
from rewards.ports import Principal
from rewards.web.auth import guard
from rewards.web.backends import backends_of
from rewards.web.bounds import time_bound
from rewards.web.errors import bad_request
from rewards.web.requests import Page, PageParams

router = APIRouter(prefix="/payouts", tags=["payouts"])


def _window(start: str | None, end: str | None) -> tuple[int | None, int | None]:
    bounds = time_bound("from", start), time_bound("to", end, end=True)
    if None not in bounds and bounds[0] > bounds[1]:
        raise bad_request("from must not be after to")
    return bounds


ROLES = {"affiliate": "affiliate", "end_user": "user"}
# The optional fields the client's PayoutsLeaderboard declares.
FIELDS = OPTIONAL_FIELDS[:4]


class LeaderboardQuery:
    """The query of both leaderboards, as §1 and the published client send it (API.md §7): `user_identifier_type` is
    another name of `identifier_type` and `user_address` of `user_identifier`; `user_type` chooses the payouts ranked
    (`affiliate` those earned as an affiliate, `end_user` as a user; absent, the leaderboard's own of §1);
    `currency_address` ranks the payouts in that on-chain currency (raw units) instead of points."""

    def __init__(
        self,
        page: Page = PageParams,
        start: str | None = Query(None, alias="from"),
        end: str | None = Query(None, alias="to"),
        user: User | None = Depends(board_user),
        user_type: UserType | None = Query(
            None, description="`affiliate` or `end_user`; absent: the leaderboard's own"
        ),
        currency_address: str | None = Query(None, description="An on-chain currency's address; absent: points"),
        fields: str | None = Query(None, description=f"Optional row fields, comma-separated: {', '.join(FIELDS)}"),
    ):
        self.page = page
        self.window = _window(start, end)
        self.user = user
        self.role = ROLES.get(user_type)
        currency = parse_currency(currency_address)
        self.currency = None if currency == "point" else currency
        self.fields = parse_fields(fields, FIELDS)


async def _leaderboard(request: Request, principal: Principal, role: str, query: LeaderboardQuery, number: bool):
    """`number`: total_amount as the client declares it (a JSON number, exact); else a decimal string (§1)."""
    computed = calculated_at()
    page, backends, project = query.page, backends_of(request), principal.project_id
    rows, count = await service.leaderboard(
        backends.warehouse,
        project,
        query.role or role,
        query.window,
        page.offset,
        page.size,
        query.user,
        query.currency,
    )
    users = [row.user for row in rows]
    wanted = query.fields & FIGURE_FIELDS
    figures = await figures_of(backends.warehouse, project, users) if wanted else UserFigures({})
    extras = await optional_fields(backends.state, project, users, query.fields, figures)
    results = [
        {
            "rank": row.rank,
            "user_identifier": row.user.identifier,
            "user_identifier_type": row.user.identifier_type,
            "address": row.user.identifier,
            "total_amount": row.total if number else format_amount(row.total),
            "total_attributions": row.attributions,
            # A string, as the client declares it; points are on no chain.
            "chain_id": "" if row.chain_id is None else str(row.chain_id),
            **extras[row.user],
        }
        for row in rows
    ]
    return answer(page, count, results, computed)


@router.get("/leaderboard/payouts")
async def affiliates_leaderboard(
    request: Request, principal: Principal = Depends(guard(None)), query: LeaderboardQuery = Depends()
):
    """Affiliates ranked by the points earned as affiliates (commissions and referral rewards). `total_amount` is a
    JSON number, as the published client declares it (API.md §7)."""
    return await _leaderboard(request, principal, "affiliate", query, number=True)


@router.get("/leaderboard/users")
async def users_leaderboard(
    request: Request, principal: Principal = Depends(guard(None)), query: LeaderboardQuery = Depends()
):
    """End users ranked by the points earned as users (end-user rewards, campaign bonuses). `total_amount` is a
    decimal string (API.md §1: the client does not read this one)."""
    return await _leaderboard(request, principal, "user", query, number=False)
