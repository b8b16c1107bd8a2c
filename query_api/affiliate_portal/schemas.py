"""The affiliate portal's answers in the shapes the published client declares (its response models, documented:
rewards.web.answers; the client's vocabulary of statuses and regions) and its windows of days (API.md §7; the
endpoints: router.py). Its volumes, revenues and earnings are exact decimals written as JSON numbers."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from pydantic import Field

from query_api.affiliate_portal import service
from query_api.affiliate_portal.figures import Earning, LevelFigures
from rewards.domain.amounts import exact_sum
from rewards.domain.timestamps import FIRST_DAY, LAST_DAY
from rewards.web.answers import ALICE, BOB, CODE, Answer, IdentifierType, TierView, exact_number, text
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


class AffiliateEarning(Answer):
    amount: float = exact_number("The amount (a token's raw units)", 130)
    currency: str = text("`point`, or the token's address", "point")


def _earnings(meaning: str) -> Any:
    return Field(description=f"{meaning}, per currency")


class GetAffiliateStatsResponse(Answer):
    user_identifier: str = text("The affiliate", ALICE)
    user_identifier_type: IdentifierType = text("Its identifier type", "evm_address")
    total_earnings: list[AffiliateEarning] = _earnings("Its earnings (commissions and referral rewards), all levels")
    referred_volume: float = exact_number("The volume of users it referred (level 1)", 1000)
    r2_volume: float = exact_number("At level 2", 200)
    r3_volume: float = exact_number("At level 3", 50)
    r4_volume: float = exact_number("At level 4", 0)
    multilevel_volume: float = exact_number("Levels 2-4", 250)
    total_volume: float = exact_number("Levels 1-4", 1250)
    end_user_volume: float = exact_number("Its own volume as a user", 0)
    referred_revenue: float = exact_number("The revenue of users it referred (level 1)", 50)
    r2_revenue: float = exact_number("At level 2", 10)
    r3_revenue: float = exact_number("At level 3", 2.5)
    r4_revenue: float = exact_number("At level 4", 0)
    referred_attributions: int = text("Conversions of users it referred", 4)
    r1_earnings: list[AffiliateEarning] = _earnings("Its level-1 earnings in tokens")
    r2_earnings: list[AffiliateEarning] = _earnings("Level 2, in tokens")
    r3_earnings: list[AffiliateEarning] = _earnings("Level 3, in tokens")
    r4_earnings: list[AffiliateEarning] = _earnings("Level 4, in tokens")
    referred_users: int = text("Users it referred who converted in the window", 3)
    active_referrers: int = text("The same", 3)
    active_referred_users_r2: int = text("At level 2", 1)
    active_referred_users_r3: int = text("At level 3", 1)
    active_referred_users_r4: int = text("At level 4", 0)
    total_referrers: int = text("Users it ever referred", 5)
    assigned_referrers: int = text("Users it refers now", 4)
    status: Literal["Active", "Paused", "Flagged", "Terminated"] = text("Its status, in the client's words", "Active")
    region: str | None = text("Its region, in the client's words (null: none)", "EU")
    referral_codes: list[str] = text("Its codes", [CODE])
    effective_tier: TierView | None = Field(description="Its effective tier; null without one")
    current_tier: TierView | None = Field(description="The same")


def all_levels(earnings: dict[int, list[Earning]]) -> list[Earning]:
    """Every level's earnings (commissions and referral rewards) summed per currency."""
    amounts: dict[str, list[Decimal]] = {}
    for level_earnings in earnings.values():
        for earning in level_earnings:
            amounts.setdefault(earning.currency, []).append(earning.amount)
    return [Earning(currency, exact_sum(values)) for currency, values in sorted(amounts.items())]


class GetAffiliateTotalStatsResponse(Answer):
    total_affiliates: int = text("The affiliates passing the filters", 12)
    active_affiliates: int = text("Those active", 10)
    suspended_affiliates: int = text("Those suspended", 1)
    total_regions: int = text("Their regions", 3)
    total_volume: float = exact_number("Their level-1 volume", 15000)
    total_revenue: float = exact_number("Their level-1 revenue", 750)
    total_attributions: int = text("Their level-1 conversions", 48)
    total_referred_users: int = text("The users they referred", 40)
    total_earnings: list[AffiliateEarning] = _earnings("Their earnings")


class ReferralTreeNodeResponse(Answer):
    user_identifier: str = text("The user", BOB)
    project_affiliate_id: str | None = text("Its affiliate id, when it is one", None)
    traders: int = text("Users of its subtree with a conversion counted for the tree's root", 1)
    total_volume: float = exact_number("The subtree's volume", 200)
    total_revenue: float = exact_number("The subtree's revenue", 12.5)
    flagged: bool = text(
        "Whether the user is one of the referrers above it (the same mailbox, a browser bound to both): they earn "
        "nothing from it (API.md §8); false for the tree's root",
        False,
    )
    children: list["ReferralTreeNodeResponse"] = Field(description="The users it referred, older referrals first")


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
        "flagged": node.flagged,
        "children": [child for child, _ in children],
    }
    return body, figures


class StatsBreakdownResult(Answer):
    date: str = text("The period's first day", "2026-11-22", json_schema_extra={"format": "date"})
    r1_volume: float = exact_number("Level-1 volume", 200)
    r2_volume: float = exact_number("Level 2", 0)
    r3_volume: float = exact_number("Level 3", 0)
    revenue: float = exact_number("Revenue, every level", 12.5)
    attributions: int = text("Conversions, every level", 1)
    referred_users: int = text("Users it referred", 1)
    earnings: float = exact_number("Its earnings in the currency asked", 20)
    earnings_currency: str | None = text("That currency's label", "point")


class GetAffiliateStatsBreakdownResponse(Answer):
    results: list[StatsBreakdownResult] = Field(description="Every period of the window, oldest first")


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


class NewTraderResponse(Answer):
    referrer_identifier: str = text("The affiliate", ALICE)
    total_new_traders: str = text("Users it referred first in the window who converted (a string)", "3")


class GetAffiliatePaidVolumesByLevelResponse(Answer):
    user_identifier: str = text("The affiliate", ALICE)
    user_identifier_type: IdentifierType = text("Its identifier type", "evm_address")
    payout_eligible_l1_volume: float = exact_number("The volume of conversions whose level-1 commission it got", 1000)
    payout_eligible_l2_volume: float = exact_number("Level 2", 200)
    payout_eligible_l3_volume: float = exact_number("Level 3", 50)
    payout_eligible_l4_volume: float = exact_number("Level 4", 0)
    payout_eligible_l1_revenue: float = exact_number("Their revenue, level 1", 50)
    payout_eligible_l2_revenue: float = exact_number("Level 2", 10)
    payout_eligible_l3_revenue: float = exact_number("Level 3", 2.5)
    payout_eligible_l4_revenue: float = exact_number("Level 4", 0)
    payout_eligible_l1_attributions: int = text("Their number, level 1", 4)
    payout_eligible_l2_attributions: int = text("Level 2", 1)
    payout_eligible_l3_attributions: int = text("Level 3", 1)
    payout_eligible_l4_attributions: int = text("Level 4", 0)
    payout_eligible_total_volume: float = exact_number("Levels 1-4", 1250)
    payout_eligible_total_revenue: float = exact_number("Levels 1-4", 62.5)
    payout_eligible_total_attributions: int = text("Levels 1-4", 6)
