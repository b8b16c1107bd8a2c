"""GET /affiliate-portal/... (API.md §7): the published client's affiliate portal (`getAffiliateStats`,
`getAffiliateTotalStats`, `getReferralTree`, `getStatsBreakdown`, `getAffiliateNewTraders`,
`getAffiliatePaidVolumesByLevel`), each answered in the shape the client declares: where it declares a number, a JSON
number written from the exact decimal (`12.5`, never the nearest float); `total_new_traders` a string.

The affiliate is named by `user_identifier` alone (the client sends no type). Windows are whole UTC days, `from` and
`to` inclusive (an ISO date, or a timestamp: its UTC day). Any key of the project reads them."""

from typing import Literal

from fastapi import APIRouter, Query, Request

from query_api.affiliate_portal import service
from query_api.affiliate_portal.figures import Matching
from query_api.affiliate_portal.schemas import (
    CLIENT_STATUS,
    NAMED_REGIONS,
    REGIONS,
    STATUS_FILTER,
    GetAffiliatePaidVolumesByLevelResponse,
    GetAffiliateStatsBreakdownResponse,
    GetAffiliateStatsResponse,
    GetAffiliateTotalStatsResponse,
    NewTraderResponse,
    ReferralTreeNodeResponse,
    all_levels,
    breakdown_window,
    client_region,
    earnings_json,
    node_json,
    periods,
    window,
)
from rewards.domain.affiliates import LEVELS
from rewards.domain.amounts import exact_sum
from rewards.domain.payouts import POINT
from rewards.ports import Affiliate, StateStore
from rewards.web.dependencies import Caller, StateDep, WarehouseDep
from rewards.web.errors import bad_request, not_found
from rewards.web.numbers import ExactJSONResponse
from rewards.web.openapi import success

router = APIRouter(prefix="/affiliate-portal", tags=["affiliate portal"])


# -- parameters --------------------------------------------------------------------------------------------------


async def _affiliate(state: StateStore, project_id: str, identifier: str | None) -> Affiliate:
    if not identifier:
        raise bad_request("user_identifier is required")
    try:
        affiliate = await service.affiliate_named(state, project_id, identifier)
    except service.NotAnIdentifier as exc:
        raise bad_request(str(exc)) from exc
    if affiliate is None:
        raise not_found("Affiliate not found")
    return affiliate


# -- the endpoints -----------------------------------------------------------------------------------------------


NOT_AN_AFFILIATE = {404: {"description": "Not Found: no affiliate of the project has this identifier"}}


@router.get(
    "/stats",
    responses={**success(GetAffiliateStatsResponse, "The affiliate's figures in the window"), **NOT_AN_AFFILIATE},
)
async def affiliate_stats(
    principal: Caller,
    state: StateDep,
    warehouse: WarehouseDep,
    user_identifier: str | None = Query(None, max_length=1024),
    date_from: str | None = Query(None, alias="from", max_length=64),
    date_to: str | None = Query(None, alias="to", max_length=64),
    this_month: bool | None = None,
    conversion_external_id: int | None = Query(None, ge=0),
    conversion_name: str | None = Query(None, max_length=128),
):
    """`getAffiliateStats`: volumes, revenue, attributions and earnings per level in the window, its own volume as an
    end user, and its referred users."""
    days = window(date_from, date_to, this_month)
    affiliate = await _affiliate(state, principal.project_id, user_identifier)
    names = await service.conversion_names(state, principal.project_id, conversion_external_id, conversion_name)
    figures = await service.stats(warehouse, service.Scope(principal.project_id, affiliate.user, days, names))
    codes, tier = await service.codes_and_tier(state, principal.project_id, affiliate)
    tier_json = None if tier is None else {"id": tier.id, "name": tier.name, "slug": tier.id, "rank": tier.rank}
    levels = figures.levels
    multilevel = exact_sum(levels[n].volume for n in (2, 3, 4))
    return ExactJSONResponse(
        {
            "user_identifier": affiliate.user.identifier,
            "user_identifier_type": affiliate.user.identifier_type,
            "total_earnings": earnings_json(all_levels(figures.earnings)),
            "referred_volume": levels[1].volume,
            **{f"r{n}_volume": levels[n].volume for n in (2, 3, 4)},
            "multilevel_volume": multilevel,
            "total_volume": exact_sum([levels[1].volume, multilevel]),
            "end_user_volume": figures.end_user_volume,
            "referred_revenue": levels[1].revenue,
            **{f"r{n}_revenue": levels[n].revenue for n in (2, 3, 4)},
            "referred_attributions": levels[1].attributions,
            **{
                f"r{n}_earnings": earnings_json([e for e in figures.earnings[n] if e.currency != POINT]) for n in LEVELS
            },
            "referred_users": levels[1].traders,
            "active_referrers": levels[1].traders,
            **{f"active_referred_users_r{n}": levels[n].traders for n in (2, 3, 4)},
            "total_referrers": figures.referred_ever,
            "assigned_referrers": figures.referred_now,
            "status": CLIENT_STATUS.get(affiliate.status, "Active"),
            "region": client_region(affiliate.region),
            "referral_codes": codes,
            "effective_tier": tier_json,
            "current_tier": tier_json,
        }
    )


def _values(request: Request, name: str) -> tuple[str, ...] | None:
    """A list filter as the client sends it (`name[]=a&name[]=b`), or as §4's (`name=a,b`, or repeated); none, or
    only empty values: no filter."""
    given = request.query_params.getlist(f"{name}[]") + request.query_params.getlist(name)
    values = tuple(dict.fromkeys(v.strip() for text in given for v in text.split(",") if v.strip()))
    return values or None


def matching(request: Request) -> Matching:
    statuses = _values(request, "statuses")
    wrong = [s for s in statuses or () if s.lower() not in STATUS_FILTER]
    if wrong:
        raise bad_request("statuses must be among Active, Paused, Flagged, Terminated (or active, pending, suspended)")
    regions = _values(request, "regions")
    upper = [r.upper() for r in regions or ()]
    if any(r not in NAMED_REGIONS and r != "OTHER" for r in upper):
        raise bad_request(f"regions must be among {', '.join(REGIONS)}")
    return Matching(
        statuses=None if statuses is None else tuple(filter(None, (STATUS_FILTER[s.lower()] for s in statuses))),
        regions=None if regions is None else tuple(r for r in upper if r != "OTHER"),
        other_regions_than=tuple(NAMED_REGIONS) if "OTHER" in upper else None,
        audiences=_values(request, "audiences"),
    )


# The list filters, documented (the handler reads them from the query string itself: `name[]` is no Python name).
LIST_FILTERS = [
    {"name": name, "in": "query", "required": False, "schema": {"type": "array", "items": {"type": "string"}},
     "description": "Values as `name[]=a&name[]=b` (the client's form), or `name=a,b` (§4's)"}
    for filter_name in ("statuses", "regions", "audiences")
    for name in (f"{filter_name}[]", filter_name)
]  # fmt: skip


@router.get(
    "/total-stats",
    responses=success(GetAffiliateTotalStatsResponse, "The project's affiliates' figures, all time"),
    openapi_extra={"parameters": LIST_FILTERS},
)
async def total_stats(request: Request, principal: Caller, warehouse: WarehouseDep):
    """`getAffiliateTotalStats`: the project's registered affiliates passing the filters (statuses and regions in the
    client's vocabulary), their number, level-1 volume, revenue and attributions (each conversion counted once, for
    its user's direct referrer), referred users and earnings, all time."""
    totals = await service.totals(warehouse, principal.project_id, matching(request))
    return ExactJSONResponse(
        {
            "total_affiliates": totals.affiliates,
            "active_affiliates": totals.active,
            "suspended_affiliates": totals.suspended,
            "total_regions": totals.regions,
            "total_volume": totals.level1.volume,
            "total_revenue": totals.level1.revenue,
            "total_attributions": totals.level1.attributions,
            "total_referred_users": totals.referred_users,
            "total_earnings": earnings_json(totals.earnings),
        }
    )


@router.get(
    "/referral-tree",
    responses={**success(ReferralTreeNodeResponse, "The affiliate's referral tree"), **NOT_AN_AFFILIATE},
)
async def referral_tree(
    principal: Caller,
    state: StateDep,
    warehouse: WarehouseDep,
    user_identifier: str | None = Query(None, max_length=1024),
):
    """`getReferralTree`: the users below the affiliate in its live referrals, down to level 4 (at most 10,000,
    nearer levels and older referrals first); a node's `traders`, `total_volume` and `total_revenue` count its own
    conversions counted for the affiliate, and those of every user below it."""
    affiliate = await _affiliate(state, principal.project_id, user_identifier)
    scope = service.Scope(principal.project_id, affiliate.user)
    tree = await service.referral_tree(warehouse, state, scope, affiliate)
    return ExactJSONResponse(node_json(tree, counts_itself=False)[0])


@router.get(
    "/stats-breakdown",
    responses={**success(GetAffiliateStatsBreakdownResponse, "The affiliate's figures per period"), **NOT_AN_AFFILIATE},
)
async def stats_breakdown(
    principal: Caller,
    state: StateDep,
    warehouse: WarehouseDep,
    group_by: Literal["day", "week", "month"],
    user_identifier: str | None = Query(None, max_length=1024),
    date_range: Literal["7d", "30d", "MTD", "QTD", "custom"] | None = None,
    date_from: str | None = Query(None, alias="from", max_length=64),
    date_to: str | None = Query(None, alias="to", max_length=64),
    conversion_external_id: int | None = Query(None, ge=0),
    conversion_name: str | None = Query(None, max_length=128),
    currency_id: str = Query(POINT, min_length=1, max_length=128),
):
    """`getStatsBreakdown`: per day, week or month of the window, every period included (zeros where nothing
    happened): r1-r3 volume, revenue and attributions of every level, the users the affiliate referred, and its
    earnings in one currency (`currency_id`: `point`, the default, or a token's address or name)."""
    days = breakdown_window(date_range, date_from, date_to)
    starts = periods(group_by, days)
    affiliate = await _affiliate(state, principal.project_id, user_identifier)
    names = await service.conversion_names(state, principal.project_id, conversion_external_id, conversion_name)
    scope = service.Scope(principal.project_id, affiliate.user, days, names)
    found = await service.breakdown(warehouse, scope, group_by, currency_id)
    label = await service.currency_label(state, principal.project_id, currency_id)
    results = []
    for start in starts:
        period = found.get(start.isoformat(), service.Period())
        results.append(
            {
                "date": start.isoformat(),
                **{f"r{n}_volume": period.volumes[n - 1] for n in (1, 2, 3)},
                "revenue": period.revenue,
                "attributions": period.attributions,
                "referred_users": period.referred_users,
                "earnings": exact_sum(period.earnings),
                "earnings_currency": label,
            }
        )
    return ExactJSONResponse({"results": results})


@router.get(
    "/new-traders",
    responses={**success(list[NewTraderResponse], "The affiliate's new traders in the window"), **NOT_AN_AFFILIATE},
)
async def affiliate_new_traders(
    principal: Caller,
    state: StateDep,
    warehouse: WarehouseDep,
    user_identifier: str | None = Query(None, max_length=1024),
    date_from: str | None = Query(None, alias="from", max_length=64),
    date_to: str | None = Query(None, alias="to", max_length=64),
    this_month: bool | None = None,
):
    """`getAffiliateNewTraders`: how many users the affiliate referred first in the window and who made a conversion
    counted for it in the window (as a string, as the client declares it)."""
    days = window(date_from, date_to, this_month)
    affiliate = await _affiliate(state, principal.project_id, user_identifier)
    scope = service.Scope(principal.project_id, affiliate.user, days)
    count = await service.new_traders(warehouse, scope)
    return ExactJSONResponse([{"referrer_identifier": affiliate.user.identifier, "total_new_traders": str(count)}])


@router.get(
    "/paid-volumes-by-level",
    responses={
        **success(GetAffiliatePaidVolumesByLevelResponse, "The affiliate's paid conversions per level"),
        **NOT_AN_AFFILIATE,
    },
)
async def paid_volumes_by_level(
    principal: Caller,
    state: StateDep,
    warehouse: WarehouseDep,
    user_identifier: str | None = Query(None, max_length=1024),
    date_from: str | None = Query(None, alias="from", max_length=64),
    date_to: str | None = Query(None, alias="to", max_length=64),
    this_month: bool | None = None,
):
    """`getAffiliatePaidVolumesByLevel`: per level, the conversions whose commission at that level was paid to the
    affiliate (their volume, revenue and number): all time, this month, or `from` to `to` (both)."""
    days = window(date_from, date_to, this_month, both=True)
    affiliate = await _affiliate(state, principal.project_id, user_identifier)
    scope = service.Scope(principal.project_id, affiliate.user, days)
    levels = await service.paid_by_level(warehouse, scope)
    prefix = "payout_eligible_"
    return ExactJSONResponse(
        {
            "user_identifier": affiliate.user.identifier,
            "user_identifier_type": affiliate.user.identifier_type,
            **{f"{prefix}l{n}_volume": levels[n].volume for n in LEVELS},
            **{f"{prefix}l{n}_revenue": levels[n].revenue for n in LEVELS},
            **{f"{prefix}l{n}_attributions": levels[n].attributions for n in LEVELS},
            f"{prefix}total_volume": exact_sum(levels[n].volume for n in LEVELS),
            f"{prefix}total_revenue": exact_sum(levels[n].revenue for n in LEVELS),
            f"{prefix}total_attributions": sum(levels[n].attributions for n in LEVELS),
        }
    )
