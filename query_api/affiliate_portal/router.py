"""GET /affiliate-portal/... (API.md §7): the published client's affiliate portal (`getAffiliateStats`,
`getAffiliateTotalStats`, `getReferralTree`, `getStatsBreakdown`, `getAffiliateNewTraders`,
`getAffiliatePaidVolumesByLevel`), each answered in the shape the client declares: where it declares a number, a JSON
number written from the exact decimal (`12.5`, never the nearest float); `total_new_traders` a string.

The affiliate is named by `user_identifier` alone (the client sends no type). Windows are whole UTC days, `from` and
`to` inclusive (an ISO date, or a timestamp: its UTC day). Any key of the project reads them."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from query_api.affiliate_portal import service
from rewards.domain.affiliates import LEVELS
from rewards.domain.amounts import exact_sum
from rewards.domain.payout_config import external_id as conversion_external_id
from rewards.domain.payouts import POINT
from rewards.domain.timestamps import FIRST_DAY, LAST_DAY
from rewards.ports import Affiliate, Principal
from rewards.web.auth import guard
from rewards.web.backends import backends_of
from rewards.web.bounds import day_bound
from rewards.web.errors import bad_request, not_found
from rewards.web.numbers import ExactJSONResponse

router = APIRouter(prefix="/affiliate-portal", tags=["affiliate portal"])

MAX_PERIODS = 1000  # periods of a breakdown answered at most

# Our §4 statuses in the client's vocabulary (AffiliateStatus), and back: a pending affiliate is not earning yet
# (Paused), a suspended one was stopped over something found (Flagged). No affiliate is ever Terminated.
CLIENT_STATUS = {"active": "Active", "pending": "Paused", "suspended": "Flagged"}
STATUS_FILTER = {
    **{client.lower(): ours for ours, client in CLIENT_STATUS.items()},
    **{ours: ours for ours in CLIENT_STATUS},
    "terminated": None,
}
# The client's AffiliateRegion: a region label naming one of them (ASCII, any case) is that region, any other label
# is "Other"; no label is null.
REGIONS = ("All", "CN", "JP", "KR", "SEA", "IND", "EN", "LATAM", "CIS", "GE", "SP", "SA", "EU", "Other")
NAMED_REGIONS = {region.upper(): region for region in REGIONS if region != "Other"}


def client_region(label: str | None) -> str | None:
    if label is None:
        return None
    return NAMED_REGIONS.get(label.upper(), "Other") if label.isascii() else "Other"


# -- answers ----------------------------------------------------------------------------------------------------


def earnings_json(earnings: list[service.Earning]) -> list[dict]:
    return [{"amount": e.amount, "currency": e.currency} for e in earnings]


# -- parameters --------------------------------------------------------------------------------------------------


def _today() -> date:
    return datetime.now(UTC).date()


def window(
    date_from: str | None, date_to: str | None, this_month: bool | None, *, both: bool = False
) -> tuple[date, date] | None:
    """The days of `from`/`to` (either alone leaves the other side open; `both`: neither or both) or of this month
    (`this_month=true`, with neither of them); None: all time."""
    if this_month and (date_from is not None or date_to is not None):
        raise bad_request("this_month cannot be combined with from or to")
    if this_month:
        today = _today()
        return today.replace(day=1), today
    if date_from is None and date_to is None:
        return None
    if both and (date_from is None or date_to is None):
        raise bad_request("from and to go together: give both, or this_month, or neither (all time)")
    first = day_bound("from", date_from) if date_from is not None else FIRST_DAY
    last = day_bound("to", date_to) if date_to is not None else LAST_DAY
    if first > last:
        raise bad_request("from must not be after to")
    return first, last


async def _affiliate(request: Request, principal: Principal, identifier: str | None) -> Affiliate:
    if not identifier:
        raise bad_request("user_identifier is required")
    try:
        affiliate = await service.affiliate_named(backends_of(request).state, principal.project_id, identifier)
    except service.NotAnIdentifier as exc:
        raise bad_request(str(exc)) from exc
    if affiliate is None:
        raise not_found("Affiliate not found")
    return affiliate


async def _conversion_names(request: Request, principal: Principal, external_id: int | None, name: str | None):
    """The conversions the figures count, by name: `conversion_external_id` names the configuration's conversion of
    that `external_id` (what GET /conversions answers for it); both given, a conversion must be both. None: every
    one."""
    if external_id is None and name is None:
        return None
    names = {name} if name is not None else None
    if external_id is not None:
        conversions = (await backends_of(request).state.get_config(principal.project_id)).conversions
        numbered = {c.event_name for c in conversions if conversion_external_id(c.event_name) == external_id}
        names = numbered if names is None else names & numbered
    return tuple(sorted(names))


# -- the endpoints -----------------------------------------------------------------------------------------------


class AffiliateEarning(BaseModel):
    amount: float
    currency: str


class AffiliatePortalTierView(BaseModel):
    id: str
    name: str
    slug: str
    rank: int


class GetAffiliateStatsResponse(BaseModel):
    user_identifier: str
    user_identifier_type: str
    total_earnings: list[AffiliateEarning]
    referred_volume: float
    r2_volume: float
    r3_volume: float
    r4_volume: float
    multilevel_volume: float
    total_volume: float
    end_user_volume: float
    referred_revenue: float
    r2_revenue: float
    r3_revenue: float
    r4_revenue: float
    referred_attributions: int
    r1_earnings: list[AffiliateEarning]
    r2_earnings: list[AffiliateEarning]
    r3_earnings: list[AffiliateEarning]
    r4_earnings: list[AffiliateEarning]
    referred_users: int
    active_referrers: int
    active_referred_users_r2: int
    active_referred_users_r3: int
    active_referred_users_r4: int
    total_referrers: int
    assigned_referrers: int
    status: Literal["Active", "Paused", "Flagged", "Terminated"]
    region: str | None
    referral_codes: list[str]
    effective_tier: AffiliatePortalTierView | None
    current_tier: AffiliatePortalTierView | None


NOT_AN_AFFILIATE = {404: {"description": "Not Found: no affiliate of the project has this identifier"}}


@router.get(
    "/stats", response_model=GetAffiliateStatsResponse, response_class=ExactJSONResponse, responses=NOT_AN_AFFILIATE
)
async def affiliate_stats(
    request: Request,
    user_identifier: str | None = Query(None, max_length=1024),
    date_from: str | None = Query(None, alias="from", max_length=64),
    date_to: str | None = Query(None, alias="to", max_length=64),
    this_month: bool | None = None,
    conversion_external_id: int | None = Query(None, ge=0),
    conversion_name: str | None = Query(None, max_length=128),
    principal: Principal = Depends(guard(None)),
):
    """`getAffiliateStats`: volumes, revenue, attributions and earnings per level in the window, its own volume as an
    end user, and its referred users."""
    days = window(date_from, date_to, this_month)
    affiliate = await _affiliate(request, principal, user_identifier)
    names = await _conversion_names(request, principal, conversion_external_id, conversion_name)
    backends = backends_of(request)
    figures = await service.stats(backends.warehouse, service.Scope(principal.project_id, affiliate.user, days, names))
    codes = (await backends.state.codes_of(principal.project_id, [affiliate.user])).get(affiliate.user, [])
    tier = (await backends.state.get_config(principal.project_id)).effective_tier(affiliate.tier)
    tier_json = None if tier is None else {"id": tier.id, "name": tier.name, "slug": tier.id, "rank": tier.rank}
    levels = figures.levels
    multilevel = exact_sum(levels[n].volume for n in (2, 3, 4))
    return ExactJSONResponse(
        {
            "user_identifier": affiliate.user.identifier,
            "user_identifier_type": affiliate.user.identifier_type,
            "total_earnings": earnings_json(_all_levels(figures.earnings)),
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


def _all_levels(earnings: dict[int, list[service.Earning]]) -> list[service.Earning]:
    """Every level's earnings (commissions and referral rewards) summed per currency."""
    amounts: dict[str, list[Decimal]] = {}
    for level_earnings in earnings.values():
        for earning in level_earnings:
            amounts.setdefault(earning.currency, []).append(earning.amount)
    return [service.Earning(currency, exact_sum(values)) for currency, values in sorted(amounts.items())]


class GetAffiliateTotalStatsResponse(BaseModel):
    total_affiliates: int
    active_affiliates: int
    suspended_affiliates: int
    total_regions: int
    total_volume: float
    total_revenue: float
    total_attributions: int
    total_referred_users: int
    total_earnings: list[AffiliateEarning]


def _values(request: Request, name: str) -> tuple[str, ...] | None:
    """A list filter as the client sends it (`name[]=a&name[]=b`), or as §4's (`name=a,b`, or repeated); none, or
    only empty values: no filter."""
    given = request.query_params.getlist(f"{name}[]") + request.query_params.getlist(name)
    values = tuple(dict.fromkeys(v.strip() for text in given for v in text.split(",") if v.strip()))
    return values or None


def matching(request: Request) -> service.Matching:
    statuses = _values(request, "statuses")
    wrong = [s for s in statuses or () if s.lower() not in STATUS_FILTER]
    if wrong:
        raise bad_request("statuses must be among Active, Paused, Flagged, Terminated (or active, pending, suspended)")
    regions = _values(request, "regions")
    upper = [r.upper() for r in regions or ()]
    if any(r not in NAMED_REGIONS and r != "OTHER" for r in upper):
        raise bad_request(f"regions must be among {', '.join(REGIONS)}")
    return service.Matching(
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
    response_model=GetAffiliateTotalStatsResponse,
    response_class=ExactJSONResponse,
    openapi_extra={"parameters": LIST_FILTERS},
)
async def total_stats(request: Request, principal: Principal = Depends(guard(None))):
    """`getAffiliateTotalStats`: the project's registered affiliates passing the filters (statuses and regions in the
    client's vocabulary), their number, level-1 volume, revenue and attributions (each conversion counted once, for
    its user's direct referrer), referred users and earnings, all time."""
    totals = await service.totals(backends_of(request).warehouse, principal.project_id, matching(request))
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


class ReferralTreeNodeResponse(BaseModel):
    user_identifier: str
    project_affiliate_id: str | None
    traders: int
    total_volume: float
    total_revenue: float
    children: list["ReferralTreeNodeResponse"]


def node_json(node: service.Node, counts_itself: bool = True) -> tuple[dict, service.LevelFigures]:
    """A node with its subtree, and the subtree's figures: the node's own conversions counted for the tree's root
    (the root's not: its figures are its referrals') and those of every user below it; `traders` counts the users
    of the subtree with any."""
    children = [node_json(child) for child in node.children]
    own = node.figures if counts_itself else service.LevelFigures()
    subtree = [own, *(figures for _, figures in children)]
    figures = service.LevelFigures(
        volume=exact_sum(f.volume for f in subtree),
        revenue=exact_sum(f.revenue for f in subtree),
        traders=(1 if own.attributions else 0) + sum(f.traders for _, f in children),
    )
    body = {
        "user_identifier": node.user.identifier,
        "project_affiliate_id": node.affiliate_id,
        "traders": figures.traders,
        "total_volume": figures.volume,
        "total_revenue": figures.revenue,
        "children": [child for child, _ in children],
    }
    return body, figures


@router.get(
    "/referral-tree",
    response_model=ReferralTreeNodeResponse,
    response_class=ExactJSONResponse,
    responses=NOT_AN_AFFILIATE,
)
async def referral_tree(
    request: Request,
    user_identifier: str | None = Query(None, max_length=1024),
    principal: Principal = Depends(guard(None)),
):
    """`getReferralTree`: the users below the affiliate in its live referrals, down to level 4 (at most 10,000,
    nearer levels and older referrals first); a node's `traders`, `total_volume` and `total_revenue` count its own
    conversions counted for the affiliate, and those of every user below it."""
    affiliate = await _affiliate(request, principal, user_identifier)
    backends = backends_of(request)
    scope = service.Scope(principal.project_id, affiliate.user)
    tree = await service.referral_tree(backends.warehouse, backends.state, scope, affiliate)
    return ExactJSONResponse(node_json(tree, counts_itself=False)[0])


class StatsBreakdownResult(BaseModel):
    date: str
    r1_volume: float
    r2_volume: float
    r3_volume: float
    revenue: float
    attributions: int
    referred_users: int
    earnings: float
    earnings_currency: str | None


class GetAffiliateStatsBreakdownResponse(BaseModel):
    results: list[StatsBreakdownResult]


PRESET_DAYS = {"7d": 7, "30d": 30}


def breakdown_window(date_range: str | None, date_from: str | None, date_to: str | None) -> tuple[date, date]:
    """`date_range`: the last 7 or 30 days (today included), month or quarter to date, or `custom` (`from` and `to`,
    both; given alone they mean custom too). Neither: the last 30 days."""
    given = date_from is not None or date_to is not None
    if date_range not in (None, "custom") and given:
        raise bad_request("from and to go with date_range=custom")
    if date_range == "custom" or given:
        if date_from is None or date_to is None:
            raise bad_request("a custom date_range needs both from and to")
        return window(date_from, date_to, None)
    today = _today()
    if date_range == "MTD":
        return today.replace(day=1), today
    if date_range == "QTD":
        return today.replace(month=(today.month - 1) // 3 * 3 + 1, day=1), today
    return today - timedelta(days=PRESET_DAYS[date_range or "30d"] - 1), today


def periods(group_by: str, days: tuple[date, date]) -> list[date]:
    """The first day of every period the window touches (a week starts on Monday)."""
    first, last = days
    if group_by == "week":
        first -= timedelta(days=first.weekday())
    elif group_by == "month":
        first = first.replace(day=1)
    found = []
    while first <= last:
        found.append(first)
        if len(found) > MAX_PERIODS:
            raise bad_request(f"the window holds more than {MAX_PERIODS} periods: group by a longer period")
        if group_by == "month":
            first = (first.replace(day=28) + timedelta(days=4)).replace(day=1)
        else:
            first += timedelta(days=7 if group_by == "week" else 1)
    return found


@router.get(
    "/stats-breakdown",
    response_model=GetAffiliateStatsBreakdownResponse,
    response_class=ExactJSONResponse,
    responses=NOT_AN_AFFILIATE,
)
async def stats_breakdown(
    request: Request,
    group_by: Literal["day", "week", "month"],
    user_identifier: str | None = Query(None, max_length=1024),
    date_range: Literal["7d", "30d", "MTD", "QTD", "custom"] | None = None,
    date_from: str | None = Query(None, alias="from", max_length=64),
    date_to: str | None = Query(None, alias="to", max_length=64),
    conversion_external_id: int | None = Query(None, ge=0),
    conversion_name: str | None = Query(None, max_length=128),
    currency_id: str = Query(POINT, min_length=1, max_length=128),
    principal: Principal = Depends(guard(None)),
):
    """`getStatsBreakdown`: per day, week or month of the window, every period included (zeros where nothing
    happened): r1-r3 volume, revenue and attributions of every level, the users the affiliate referred, and its
    earnings in one currency (`currency_id`: `point`, the default, or a token's address or name)."""
    days = breakdown_window(date_range, date_from, date_to)
    starts = periods(group_by, days)
    affiliate = await _affiliate(request, principal, user_identifier)
    names = await _conversion_names(request, principal, conversion_external_id, conversion_name)
    backends = backends_of(request)
    scope = service.Scope(principal.project_id, affiliate.user, days, names)
    found = await service.breakdown(backends.warehouse, scope, group_by, currency_id)
    label = await _currency_label(request, principal, currency_id)
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


async def _currency_label(request: Request, principal: Principal, currency_id: str) -> str:
    """How the portal names a currency: `point`, or a token's name (as the configuration has it)."""
    if currency_id.lower() == POINT:
        return POINT
    config = await backends_of(request).state.get_config(principal.project_id)
    for conversion in config.conversions:
        token = conversion.currency
        if token != POINT and currency_id.lower() in (token.address.lower(), token.name.lower()):
            return token.name
    return currency_id


class NewTraderResponse(BaseModel):
    referrer_identifier: str
    total_new_traders: str


@router.get(
    "/new-traders", response_model=list[NewTraderResponse], response_class=ExactJSONResponse, responses=NOT_AN_AFFILIATE
)
async def affiliate_new_traders(
    request: Request,
    user_identifier: str | None = Query(None, max_length=1024),
    date_from: str | None = Query(None, alias="from", max_length=64),
    date_to: str | None = Query(None, alias="to", max_length=64),
    this_month: bool | None = None,
    principal: Principal = Depends(guard(None)),
):
    """`getAffiliateNewTraders`: how many users the affiliate referred first in the window and who made a conversion
    counted for it in the window (as a string, as the client declares it)."""
    days = window(date_from, date_to, this_month)
    affiliate = await _affiliate(request, principal, user_identifier)
    scope = service.Scope(principal.project_id, affiliate.user, days)
    count = await service.new_traders(backends_of(request).warehouse, scope)
    return ExactJSONResponse([{"referrer_identifier": affiliate.user.identifier, "total_new_traders": str(count)}])


class GetAffiliatePaidVolumesByLevelResponse(BaseModel):
    user_identifier: str
    user_identifier_type: str
    payout_eligible_l1_volume: float
    payout_eligible_l2_volume: float
    payout_eligible_l3_volume: float
    payout_eligible_l4_volume: float
    payout_eligible_l1_revenue: float
    payout_eligible_l2_revenue: float
    payout_eligible_l3_revenue: float
    payout_eligible_l4_revenue: float
    payout_eligible_l1_attributions: int
    payout_eligible_l2_attributions: int
    payout_eligible_l3_attributions: int
    payout_eligible_l4_attributions: int
    payout_eligible_total_volume: float
    payout_eligible_total_revenue: float
    payout_eligible_total_attributions: int


@router.get(
    "/paid-volumes-by-level",
    response_model=GetAffiliatePaidVolumesByLevelResponse,
    response_class=ExactJSONResponse,
    responses=NOT_AN_AFFILIATE,
)
async def paid_volumes_by_level(
    request: Request,
    user_identifier: str | None = Query(None, max_length=1024),
    date_from: str | None = Query(None, alias="from", max_length=64),
    date_to: str | None = Query(None, alias="to", max_length=64),
    this_month: bool | None = None,
    principal: Principal = Depends(guard(None)),
):
    """`getAffiliatePaidVolumesByLevel`: per level, the conversions whose commission at that level was paid to the
    affiliate (their volume, revenue and number): all time, this month, or `from` to `to` (both)."""
    days = window(date_from, date_to, this_month, both=True)
    affiliate = await _affiliate(request, principal, user_identifier)
    scope = service.Scope(principal.project_id, affiliate.user, days)
    levels = await service.paid_by_level(backends_of(request).warehouse, scope)
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
