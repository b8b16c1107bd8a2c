"""GET /payouts, /payouts/movements and /payouts/by-referrer (API.md §7): a user's payouts as the published client's
getUserPayoutsByConversion / getUserPointsByConversion, getUserPayoutMovements / getUserPointsMovements and
getPayoutsByReferrer read them (docs/fuul-sdk-7.41.0-surface.md, G6)."""

from decimal import Decimal
from typing import Literal

from fastapi import APIRouter, Depends, Query, Request

from query_api.user_payouts import service
from rewards.domain.amounts import format_amount
from rewards.domain.referrals import json_number
from rewards.domain.timestamps import format_timestamp
from rewards.domain.tracking import names_project
from rewards.ports import Principal
from rewards.web.auth import guard
from rewards.web.backends import backends_of
from rewards.web.bounds import day_bound, time_bound
from rewards.web.errors import ApiError, bad_request
from rewards.web.numbers import ExactJSONResponse
from rewards.web.requests import PageParams, parse_user

router = APIRouter(prefix="/payouts", tags=["payouts"])

Kind = Literal["point", "onchain-currency"]
ONCHAIN = "onchain-currency"


def _window(names: tuple[str, str], start: str | None, end: str | None) -> service.Window:
    window = service.Window(time_bound(names[0], start), time_bound(names[1], end, end=True))
    if None not in (window.start_ms, window.end_ms) and window.start_ms > window.end_ms:
        raise bad_request(f"{names[0]} must not be after {names[1]}")
    return window


def _check_project(project_id: str | None, principal: Principal) -> None:
    """The client sends `project_id` when its caller gives one: it must name the key's project (never another's)."""
    if project_id is not None and not names_project(project_id, principal.project_id):
        raise ApiError(403, "project_id is not this key's project")


OTHER_PROJECT = {403: {"description": "Forbidden: `project_id` names a project other than the key's"}}


class UserQuery:
    """The query of the by-conversion and movements reads: the user (`identifier_type`, as the client sends it, or
    `user_identifier_type`), the currency kind, the page, and the caller's `project_id`, checked."""

    def __init__(
        self,
        kind: Kind = Query(alias="type", description="`point`, or `onchain-currency` (tokens)"),
        user_identifier: str | None = None,
        identifier_type: str | None = None,
        user_identifier_type: str | None = None,
        project_id: str | None = Query(None, description="Optional; when sent, the key's project"),
        page=PageParams,
        principal: Principal = Depends(guard(None)),
    ):
        _check_project(project_id, principal)
        self.user = parse_user(user_identifier, identifier_type or user_identifier_type)
        self.onchain = kind == ONCHAIN
        self.page = page
        self.project_id = principal.project_id

    def answer(self, total: int, results: list[dict]) -> dict:
        return {"total_results": total, "page": self.page.page, "page_size": self.page.size, "results": results}


def _currency_json(currency: service.Currency, chain_id_type: type) -> dict:
    return {"currency_address": currency.address, "chain_id": chain_id_type(currency.chain_id)}


@router.get("", responses=OTHER_PROJECT)
async def by_conversion(
    request: Request,
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
        backends_of(request).warehouse, query.project_id, query.user, query.onchain, window, page.offset, page.size
    )
    results = [
        {
            "is_referrer": row.is_referrer,
            "total_amount": format_amount(row.amount),
            "conversion_id": row.conversion,
            "conversion_name": row.conversion,
            **(_currency_json(row.currency, str) if query.onchain else {}),
        }
        for row in rows
    ]
    return query.answer(total, results)


@router.get("/movements", responses=OTHER_PROJECT)
async def movements(
    request: Request,
    query: UserQuery = Depends(),
    from_date: str | None = Query(None, description="Optional, inclusive (ISO 8601 or epoch ms)"),
    to_date: str | None = Query(None, description="Optional, inclusive; a date alone takes in its whole day"),
):
    """The user's payouts one row each, newest first; `payout_status` is `paid` for points and the claim check's
    status (`open`, `closed`, `claimed`) for tokens."""
    window = _window(("from_date", "to_date"), from_date, to_date)
    page = query.page
    rows, total = await service.movements(
        backends_of(request).warehouse, query.project_id, query.user, query.onchain, window, page.offset, page.size
    )
    results = [
        {
            "date": format_timestamp(row.happened_ms),
            **(_currency_json(row.currency, int) if query.onchain else {}),
            "is_referrer": row.is_referrer,
            "conversion_id": row.conversion,
            "conversion_name": row.conversion,
            "total_amount": format_amount(row.amount),
            "project_name": query.project_id,  # the state store's ports read no project name (README "Payout history")
            "payout_status": row.status,
            "payout_status_details": None,
        }
        for row in rows
    ]
    return query.answer(total, results)


def _earning_items(amounts: dict[service.Currency, Decimal]) -> list[dict]:
    """The client's `EarningItem`s: points as the currency `{"address": "point", "chainId": null}`, first; tokens by
    their address and chain id (a string); amounts are JSON numbers (raw integers of a token's smallest unit)."""
    ordered = sorted(amounts.items(), key=lambda item: (item[0].address != service.POINT, item[0].chain_id,
                                                        item[0].address))  # fmt: skip
    return [
        {
            "currency": {
                "address": currency.address,
                "chainId": None if currency.address == service.POINT else str(currency.chain_id),
            },
            "amount": json_number(amount),
        }
        for currency, amount in ordered
    ]


def _referred_json(referred: service.Referred, referrer_identifier: str) -> dict:
    return {
        referred.user.identifier: {
            "volume": json_number(referred.volume),
            "direct_eligible_volume": json_number(referred.direct_volume),
            "indirect_eligible_volume": json_number(referred.indirect_volume),
            "earnings": _earning_items(referred.direct_commissions),
            "total_commission_earned": _earning_items(referred.commissions),
            "date_joined": None if referred.joined_ms is None else format_timestamp(referred.joined_ms),
            "event_referrer_identifier": referrer_identifier,
            "user_rebate_rate": None if referred.rebate_rate is None else json_number(referred.rebate_rate),
            "referral_code": None if referred.referral is None else referred.referral.code,
        }
    }


@router.get("/by-referrer")
async def by_referrer(
    request: Request,
    user_identifier: str | None = None,
    user_identifier_type: str | None = None,
    identifier_type: str | None = None,
    referrer_scope: Literal["active", "all"] = "active",
    from_date: str | None = Query(None, description="Optional, an inclusive UTC day (YYYY-MM-DD)"),
    to_date: str | None = Query(None, description="Optional, an inclusive UTC day (YYYY-MM-DD)"),
    principal: Principal = Depends(guard(None)),
):
    """The users the referrer referred directly, each as a one-key object `{identifier: figures}`: its volume, the
    eligible volumes and the commissions it brought the referrer (its own conversions at level 1, its downline's at
    levels 2-4), in the window; `active` (default) those with a volume or earnings there, `all` also every user the
    referrer refers now. The most eligible volume first, at most 1,000."""
    referrer = parse_user(user_identifier, user_identifier_type or identifier_type)
    days = (day_bound("from_date", from_date), day_bound("to_date", to_date))
    if None not in days and days[0] > days[1]:
        raise bad_request("from_date must not be after to_date")
    backends = backends_of(request)
    referred = await service.referred_users(
        backends.warehouse, backends.state, principal.project_id, referrer, days, referrer_scope == "all"
    )
    return ExactJSONResponse([_referred_json(user, referrer.identifier) for user in referred])
