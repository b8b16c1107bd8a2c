"""GET /affiliates (API.md §4): the dashboard's listing of a project's affiliates and their figures; and the published
client's reads of one affiliate and of codes (API.md §7)."""

from datetime import UTC, date, datetime, timedelta
from typing import Literal

from fastapi import APIRouter, Query

from query_api.affiliates import service
from query_api.affiliates.schemas import (
    ALLOWED_VALUES,
    PER_PAGE,
    RANGE_DAYS,
    AffiliateInfo,
    AffiliatePage,
    CodeAvailability,
    CodeFree,
    DateRange,
    SortBy,
    affiliate_info_json,
)
from rewards.domain.timestamps import FIRST_DAY, LAST_DAY
from rewards.web.bounds import day_bound
from rewards.web.dependencies import Caller, CodeFiguresDep, CodeTrafficDep, ServiceCaller, StateDep, WarehouseDep
from rewards.web.errors import bad_request, not_found
from rewards.web.numbers import ExactJSONResponse
from rewards.web.openapi import success
from rewards.web.requests import MAX_PAGE, parse_user

router = APIRouter(prefix="/affiliates", tags=["affiliates"])


def _list(name: str, text: str | None) -> tuple[str, ...] | None:
    """A comma-separated filter; an empty one filters nothing."""
    values = tuple(dict.fromkeys(v.strip() for v in (text or "").split(",") if v.strip()))
    if not values:
        return None
    allowed = ALLOWED_VALUES.get(name)
    wrong = [v for v in values if allowed is not None and v not in allowed]
    if wrong:
        raise bad_request(f"{name} must be a comma-separated list of {', '.join(allowed)}")
    return values


def window(date_range: str, date_from: str | None, date_to: str | None, today: date) -> tuple[date, date] | None:
    """The days (inclusive, UTC) in which volumes and earnings count; None for all time.
    `dateFrom`/`dateTo` override `dateRange`; either alone leaves the other side open."""
    start, end = day_bound("dateFrom", date_from), day_bound("dateTo", date_to)
    if start is not None or end is not None:
        if start is not None and end is not None and start > end:
            raise bad_request("dateFrom must not be after dateTo")
        return start or FIRST_DAY, end or LAST_DAY
    if date_range == "all":
        return None
    return today - timedelta(days=RANGE_DAYS[date_range] - 1), today


@router.get("", responses=success(AffiliatePage, "A page of the project's affiliates and their figures"))
async def list_affiliates(
    principal: ServiceCaller,
    state: StateDep,
    warehouse: WarehouseDep,
    page: int = Query(1, ge=1, le=MAX_PAGE),
    per_page: int = Query(25, description="10, 25, 50 or 100", json_schema_extra={"enum": list(PER_PAGE)}),
    query: str | None = Query(None, max_length=256),
    sort_by: SortBy = "total_volume",
    sort_order: Literal["asc", "desc"] = "desc",
    statuses: str | None = None,
    regions: str | None = None,
    audiences: str | None = None,
    tiers: str | None = None,
    tax_statuses: str | None = None,
    date_range: DateRange = Query("all", alias="dateRange"),
    date_from: str | None = Query(None, alias="dateFrom"),
    date_to: str | None = Query(None, alias="dateTo"),
):
    if per_page not in PER_PAGE:
        raise bad_request("per_page must be one of 10, 25, 50, 100")
    raw_filters = {"statuses": statuses, "regions": regions, "audiences": audiences, "tax_statuses": tax_statuses}
    filters = {name: values for name, text in raw_filters.items() if (values := _list(name, text)) is not None}
    days = window(date_range, date_from, date_to, datetime.now(UTC).date())
    asked = service.Listing(
        sort_by="r1_volume" if sort_by == "volume" else sort_by,
        descending=sort_order == "desc",
        filters=filters,
        tiers=_list("tiers", tiers),
        default_tier=None,  # the configuration's (service.listing_page)
        search=(query or "").strip() or None,
        days=days,
        offset=(page - 1) * per_page,
        limit=per_page,
    )
    results, total = await service.listing_page(state, warehouse, principal.project_id, asked)
    return {
        "results": results,
        "page": page,
        "per_page": per_page,
        "total_count": total,
        "total_pages": -(-total // per_page),
    }


# -- the published client's reads of one affiliate and of codes (API.md §7): any key of the project ---------------
# Registered after GET /affiliates (the listing) and, for the codes, before GET /affiliates/{user_identifier}, whose
# path would match theirs.


@router.get("/codes/{code}/availability", responses=success(CodeAvailability, "Whether the code can be used"))
async def code_availability(principal: Caller, state: StateDep, code: str):
    """`isAffiliateCodeAvailable`: the code (referral or affiliate, any of its names) exists and has uses left."""
    return {"available": await service.code_available(state, principal.project_id, code)}


@router.get("/codes/{code}", responses=success(CodeFree, "Whether the code is free"))
async def code_free(principal: Caller, state: StateDep, code: str):
    """`isAffiliateCodeFree`: the text may be chosen as an affiliate code: no code of the project has or had it
    (case-insensitively), and it is one (3-32 characters of A-Z a-z 0-9 _ -)."""
    return {"free": await service.code_free(state, principal.project_id, code)}


@router.get(
    "/{user_identifier}",
    responses={
        **success(AffiliateInfo, "The affiliate and its codes"),
        404: {"description": "Not Found: the user is not an affiliate"},
    },
)  # one path segment: GET /affiliates/{user}/rebate-rate is no read (405)
async def affiliate_info(
    principal: Caller,
    state: StateDep,
    traffic: CodeTrafficDep,
    figures: CodeFiguresDep,
    user_identifier: str,
    identifier_type: str | None = None,
    user_identifier_type: str | None = None,
):
    """`getAffiliateInfo` / `getAffiliateCode`: the affiliate and each of its codes (oldest first) with their figures:
    uses, clicks, users referred through it, what it earned through it (points) and its rebate rate."""
    user = parse_user(user_identifier, identifier_type or user_identifier_type)
    info = await service.affiliate_info(state, traffic, figures, principal.project_id, user)
    if info is None:
        raise not_found("Affiliate not found")
    return ExactJSONResponse(affiliate_info_json(info, user))
