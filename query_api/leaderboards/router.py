"""The published client's leaderboards (API.md §7, docs/fuul-sdk-7.41.0-surface.md G5): GET /payouts/leaderboard/points,
/volume, /revenue and /referred-volume, and GET /leaderboard/referred; and §1's, as the client reads them: GET
/payouts/leaderboard/payouts and /users (their own router, `payout_boards`). Any key of the project.

Ranked like §1 (ties share a rank: 1, 2, 2, 4; then by identifier), `calculated_at` in every answer, amounts in the
JSON type the client declares: a number (exact, query_api.leaderboards.numbers) or a decimal string."""

from decimal import Decimal

from fastapi import APIRouter, Depends, Query

from query_api.leaderboards import payout_boards_service, service
from query_api.leaderboards.schemas import (
    FIGURE_FIELDS,
    OPTIONAL_FIELDS,
    USER_TYPE_DOC,
    LeaderboardQuery,
    PayoutsBoard,
    PointsBoard,
    ReferredBoard,
    ReferredVolumes,
    RevenueBoard,
    UsersBoard,
    UserType,
    VolumeBoard,
    answer,
    board_user,
    calculated_at,
    identity,
    parse_currency,
    parse_fields,
)
from rewards.domain.amounts import format_amount
from rewards.domain.identifiers import IDENTIFIER_TYPES, InvalidIdentifier, canonical_identifier
from rewards.domain.payouts import User
from rewards.ports import StateStore, Warehouse
from rewards.web.dependencies import Caller, StateDep, WarehouseDep
from rewards.web.errors import bad_request
from rewards.web.numbers import ExactJSONResponse
from rewards.web.openapi import success
from rewards.web.requests import Page, PageParams

router = APIRouter(tags=["leaderboards"])

BOTH = (service.USER, service.AFFILIATE)
REVENUE_FIELDS = ("attributions", "volume_usd", "points")
MAX_REFERRED_VOLUME_USERS = 100


def _page(page: Page) -> tuple[int, int]:
    return page.offset, page.size


@router.get("/payouts/leaderboard/points", responses=success(PointsBoard, "A page of users by points"))
async def points_leaderboard(
    principal: Caller,
    state: StateDep,
    warehouse: WarehouseDep,
    page: Page = PageParams,
    user: User | None = Depends(board_user),
    fields: str | None = Query(None, description=f"Optional row fields, comma-separated: {', '.join(OPTIONAL_FIELDS)}"),
):
    """Users by every point they earned (as users and as affiliates), all time. `total_amount` is a number;
    `total_attributions` counts the conversions that paid the user."""
    chosen = parse_fields(fields, OPTIONAL_FIELDS)
    computed = calculated_at()
    project = principal.project_id
    rows, count = await service.points_board(warehouse, project, _page(page), user)
    users = [row.user for row in rows]
    figures = await service.figures_of(warehouse, project, users)
    extras = await service.optional_fields(state, project, users, chosen, figures)
    results = [
        {
            "rank": row.rank,
            **identity(row.user),
            "total_amount": row.total,
            "total_attributions": figures.of(row.user, BOTH).attributions,
            **extras[row.user],
        }
        for row in rows
    ]
    return answer(page, count, results, computed)


@router.get("/payouts/leaderboard/volume", responses=success(VolumeBoard, "A page of users by volume"))
async def volume_leaderboard(
    principal: Caller,
    state: StateDep,
    warehouse: WarehouseDep,
    page: Page = PageParams,
    user: User | None = Depends(board_user),
    user_type: UserType | None = Query(None, description=USER_TYPE_DOC),
    currency_address: str | None = Query(None, description="Only the volume of events whose value names this currency"),
):
    """Users by volume: the sum of `args.value.amount` of conversions, their own (`end_user`) and those of the users
    below them in referral chains, levels 1-4 (`affiliate`). `total_amount` is a decimal string."""
    currency = parse_currency(currency_address)
    computed = calculated_at()
    project = principal.project_id
    sides = service.SIDES[user_type]
    rows, count = await service.volume_board(warehouse, project, sides, currency, _page(page), user)
    codes = await service.affiliate_codes(state, project, [row.user for row in rows])
    results = [
        {
            "rank": row.rank,
            **identity(row.user),
            "affiliate_code": codes.get(row.user),
            "total_amount": format_amount(row.total),
            "chain_id": (row.columns["chain"] or None) if currency is not None else None,
        }
        for row in rows
    ]
    return answer(page, count, results, computed)


@router.get("/payouts/leaderboard/revenue", responses=success(RevenueBoard, "A page of users by revenue"))
async def revenue_leaderboard(
    principal: Caller,
    state: StateDep,
    warehouse: WarehouseDep,
    page: Page = PageParams,
    user: User | None = Depends(board_user),
    user_type: UserType | None = Query(None, description=USER_TYPE_DOC),
    currency_address: str | None = Query(None, description="Only the revenue of events naming this currency"),
    fields: str | None = Query(None, description=f"Optional row fields, comma-separated: {', '.join(REVENUE_FIELDS)}"),
):
    """Users by revenue: the sum of `args.revenue.amount` of conversions, counted like the volume. `total_amount` is a
    decimal string; the optional `attributions` (conversions with a payout to the user), `volume_usd` (the volume, in
    the currencies the events name) and `points` are numbers, on the same side(s)."""
    chosen = parse_fields(fields, REVENUE_FIELDS)
    currency = parse_currency(currency_address)
    computed = calculated_at()
    project = principal.project_id
    sides = service.SIDES[user_type]
    rows, count = await service.revenue_board(warehouse, project, sides, currency, _page(page), user)
    users = [row.user for row in rows]
    codes = await service.affiliate_codes(state, project, users)
    wanted = chosen & {"attributions", "volume_usd"}
    figures = await service.figures_of(warehouse, project, users, currency) if wanted else None
    points = await service.points_of(warehouse, project, users, sides) if "points" in chosen else {}
    results = []
    for row in rows:
        result = {"rank": row.rank, **identity(row.user), "affiliate_code": codes.get(row.user)}
        result["total_amount"] = format_amount(row.total)
        if figures is not None:
            mine = figures.of(row.user, sides)
            optional = {"attributions": mine.attributions, "volume_usd": mine.volume}
            result.update({name: value for name, value in optional.items() if name in chosen})
        if "points" in chosen:
            result["points"] = points.get(row.user, Decimal(0))
        results.append(result)
    return answer(page, count, results, computed)


@router.get("/leaderboard/referred", responses=success(ReferredBoard, "A page of referrers by users referred"))
async def referred_users_leaderboard(principal: Caller, warehouse: WarehouseDep, page: Page = PageParams):
    """Referrers by the users they referred (level 1), less those whose referral was removed since."""
    computed = calculated_at()
    rows, count = await service.referred_board(warehouse, principal.project_id, _page(page))
    results = [{"rank": row.rank, **identity(row.user), "total_referred_users": int(row.total)} for row in rows]
    return answer(page, count, results, computed)


def _referred_volume_users(text: str | None, identifier_type: str) -> list[User]:
    """The users of `user_identifiers` (comma-separated, 1 to 100; each one once, first come first)."""
    identifiers = [part.strip() for part in (text or "").split(",") if part.strip()]
    if not identifiers:
        raise bad_request("user_identifiers is required (1 to 100 identifiers, comma-separated)")
    if len(identifiers) > MAX_REFERRED_VOLUME_USERS:
        raise bad_request(f"user_identifiers must hold at most {MAX_REFERRED_VOLUME_USERS} identifiers")
    if identifier_type not in IDENTIFIER_TYPES:
        raise bad_request(f"identifier_type must be one of: {', '.join(IDENTIFIER_TYPES)}")
    users, errors = [], []
    for index, identifier in enumerate(identifiers):
        try:
            users.append(User(canonical_identifier(identifier, identifier_type), identifier_type))
        except InvalidIdentifier:
            errors.append(f"user_identifiers[{index}] is not a valid {identifier_type}")
    if errors:
        raise bad_request(errors)
    return list(dict.fromkeys(users))


@router.get("/payouts/leaderboard/referred-volume", responses=success(ReferredVolumes, "Each user's referred volume"))
async def referred_volume(
    principal: Caller,
    warehouse: WarehouseDep,
    user_identifiers: str | None = Query(None, description="1 to 100 identifiers, comma-separated"),
    identifier_type: str | None = Query(None, description="The identifiers' type (default evm_address)"),
    user_identifier_type: str | None = Query(None, description="Another name of identifier_type"),
):
    """Each user's referred volume: the sum of `args.value.amount` of the conversions of the users below it in
    referral chains (levels 1-4), a number; 0 for a user with none."""
    users = _referred_volume_users(user_identifiers, identifier_type or user_identifier_type or "evm_address")
    figures = await service.figures_of(warehouse, principal.project_id, users)
    volumes = [
        {"user_identifier": user.identifier, "referred_volume": figures.of(user, (service.AFFILIATE,)).volume}
        for user in users
    ]
    return ExactJSONResponse(
        {"project_id": principal.project_id, "referred_volumes": volumes, "total_count": len(volumes)}
    )


# -- §1's leaderboards (API.md §1, as the published client reads them) -------------------------------------------

payout_boards = APIRouter(prefix="/payouts", tags=["payouts"])


async def _payout_board(
    state: StateStore, warehouse: Warehouse, project: str, role: str, query: LeaderboardQuery, number: bool
):
    """`number`: total_amount as the client declares it (a JSON number, exact); else a decimal string (§1)."""
    computed = calculated_at()
    page = query.page
    rows, count = await payout_boards_service.leaderboard(
        warehouse,
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
    figures = await service.figures_of(warehouse, project, users) if wanted else service.UserFigures({})
    extras = await service.optional_fields(state, project, users, query.fields, figures)
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


@payout_boards.get("/leaderboard/payouts", responses=success(PayoutsBoard, "A page of affiliates by points"))
async def affiliates_leaderboard(
    principal: Caller, state: StateDep, warehouse: WarehouseDep, query: LeaderboardQuery = Depends()
):
    """Affiliates ranked by the points earned as affiliates (commissions and referral rewards). `total_amount` is a
    JSON number, as the published client declares it (API.md §7)."""
    return await _payout_board(state, warehouse, principal.project_id, "affiliate", query, number=True)


@payout_boards.get("/leaderboard/users", responses=success(UsersBoard, "A page of end users by points"))
async def users_leaderboard(
    principal: Caller, state: StateDep, warehouse: WarehouseDep, query: LeaderboardQuery = Depends()
):
    """End users ranked by the points earned as users (end-user rewards, campaign bonuses). `total_amount` is a
    decimal string (API.md §1: the client does not read this one)."""
    return await _payout_board(state, warehouse, principal.project_id, "user", query, number=False)
