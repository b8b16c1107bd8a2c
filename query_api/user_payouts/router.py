"""GET /payouts, /payouts/movements and /payouts/by-referrer (API.md §7): a user's payouts as the published client's
getUserPayoutsByConversion / getUserPointsByConversion, getUserPayoutMovements / getUserPointsMovements and
getPayoutsByReferrer read them (docs/fuul-sdk-7.41.0-surface.md, G6)."""

from typing import Literal

from fastapi import APIRouter, Depends, Query

from query_api.user_payouts import service
from query_api.user_payouts.schemas import (
    ConversionPayouts,
    Movements,
    ReferredUser,
    UserQuery,
    currency_json,
    referred_json,
)
from rewards.domain.amounts import format_amount
from rewards.domain.timestamps import format_timestamp
from rewards.web.bounds import day_bound, time_window
from rewards.web.dependencies import Caller, StateDep, WarehouseDep
from rewards.web.errors import bad_request
from rewards.web.numbers import ExactJSONResponse
from rewards.web.openapi import success
from rewards.web.requests import parse_user

router = APIRouter(prefix="/payouts", tags=["payouts"])


def _window(names: tuple[str, str], start: str | None, end: str | None) -> service.Window:
    return service.Window(*time_window(names, start, end, end_inclusive=True))


OTHER_PROJECT = {403: {"description": "Forbidden: `project_id` names a project other than the key's"}}


@router.get(
    "", responses={**success(ConversionPayouts, "A page of the user's payouts per conversion"), **OTHER_PROJECT}
)
async def by_conversion(
    warehouse: WarehouseDep,
    query: UserQuery = Depends(),
    start: str | None = Query(None, alias="from", description="Optional (all time when absent), inclusive"),
    end: str | None = Query(None, alias="to", description="Optional, inclusive; a date alone takes in its whole day"),
    group_by: str | None = Query(None, description="Accepted and ignored: the payouts are grouped by conversion"),
):
    """The user's payouts summed per conversion (`conversion_id` = `conversion_name` = the event's name;
    `referral_reward` for referral rewards), as a referrer or not, and per currency for tokens."""
    window = _window(("from", "to"), start, end)
    page = query.page
    rows, total = await service.by_conversion(
        warehouse, query.project_id, query.user, query.onchain, window, page.offset, page.size
    )
    results = [
        {
            "is_referrer": row.is_referrer,
            "total_amount": format_amount(row.amount),
            "conversion_id": row.conversion,
            "conversion_name": row.conversion,
            **(currency_json(row.currency, str) if query.onchain else {}),
        }
        for row in rows
    ]
    return query.answer(total, results)


@router.get("/movements", responses={**success(Movements, "A page of the user's payouts"), **OTHER_PROJECT})
async def movements(
    warehouse: WarehouseDep,
    query: UserQuery = Depends(),
    from_date: str | None = Query(None, description="Optional, inclusive (ISO 8601 or epoch ms)"),
    to_date: str | None = Query(None, description="Optional, inclusive; a date alone takes in its whole day"),
):
    """The user's payouts one row each, newest first; `payout_status` is `paid` for points and the claim check's
    status (`open`, `closed`, `claimed`) for tokens, or `rejected` for a payout the rules refused (API.md §8), its
    reason in `payout_status_details`."""
    window = _window(("from_date", "to_date"), from_date, to_date)
    page = query.page
    rows, total = await service.movements(
        warehouse, query.project_id, query.user, query.onchain, window, page.offset, page.size
    )
    results = [
        {
            "date": format_timestamp(row.happened_ms),
            **(currency_json(row.currency, int) if query.onchain else {}),
            "is_referrer": row.is_referrer,
            "conversion_id": row.conversion,
            "conversion_name": row.conversion,
            "total_amount": format_amount(row.amount),
            # the state store's ports read no project name (docs/client.md, "Payout history")
            "project_name": query.project_id,
            "payout_status": row.status,
            "payout_status_details": row.rejection,
            "id": row.payout_id,
            "reversal": row.reversal,
        }
        for row in rows
    ]
    return query.answer(total, results)


@router.get(
    "/by-referrer",
    responses=success(list[ReferredUser], "The users the referrer referred directly, with their figures"),
)
async def by_referrer(
    principal: Caller,
    warehouse: WarehouseDep,
    state: StateDep,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    identifier_type: str | None = None,
    referrer_scope: Literal["active", "all"] = "active",
    from_date: str | None = Query(None, description="Optional, an inclusive UTC day (YYYY-MM-DD)"),
    to_date: str | None = Query(None, description="Optional, an inclusive UTC day (YYYY-MM-DD)"),
):
    """The users the referrer referred directly, each as a one-key object `{identifier: figures}`: its volume, the
    eligible volumes and the commissions it brought the referrer (its own conversions at level 1, its downline's at
    levels 2-4), in the window; `active` (default) those with a volume or earnings there, `all` also every user the
    referrer refers now. The most eligible volume first, at most 1,000."""
    referrer = parse_user(user_identifier, user_identifier_type or identifier_type)
    days = (day_bound("from_date", from_date), day_bound("to_date", to_date))
    if None not in days and days[0] > days[1]:
        raise bad_request("from_date must not be after to_date")
    referred = await service.referred_users(
        warehouse, state, principal.project_id, referrer, days, referrer_scope == "all"
    )
    return ExactJSONResponse([referred_json(user, referrer.identifier) for user in referred])
