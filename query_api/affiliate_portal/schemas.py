"""The affiliate portal's answers in the shapes the published client declares (its response models, the client's
vocabulary of statuses and regions) and its windows of days (API.md §7; the endpoints: router.py)."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel

from query_api.affiliate_portal import service
from query_api.affiliate_portal.figures import Earning, LevelFigures
from rewards.domain.amounts import exact_sum
from rewards.domain.timestamps import FIRST_DAY, LAST_DAY
from rewards.web.bounds import day_bound
from rewards.web.errors import bad_request

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


def earnings_json(earnings: list[Earning]) -> list[dict]:
    return [{"amount": e.amount, "currency": e.currency} for e in earnings]


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


def all_levels(earnings: dict[int, list[Earning]]) -> list[Earning]:
    """Every level's earnings (commissions and referral rewards) summed per currency."""
    amounts: dict[str, list[Decimal]] = {}
    for level_earnings in earnings.values():
        for earning in level_earnings:
            amounts.setdefault(earning.currency, []).append(earning.amount)
    return [Earning(currency, exact_sum(values)) for currency, values in sorted(amounts.items())]


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


class ReferralTreeNodeResponse(BaseModel):
    user_identifier: str
    project_affiliate_id: str | None
    traders: int
    total_volume: float
    total_revenue: float
    children: list["ReferralTreeNodeResponse"]


def node_json(node: service.Node, counts_itself: bool = True) -> tuple[dict, LevelFigures]:
    """A node with its subtree, and the subtree's figures: the node's own conversions counted for the tree's root
    (the root's not: its figures are its referrals') and those of every user below it; `traders` counts the users
    of the subtree with any."""
    children = [node_json(child) for child in node.children]
    own = node.figures if counts_itself else LevelFigures()
    subtree = [own, *(figures for _, figures in children)]
    figures = LevelFigures(
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


class NewTraderResponse(BaseModel):
    referrer_identifier: str
    total_new_traders: str


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
