"""The affiliate listing (API.md §4): a page of a project's affiliates, in order, with their figures.

Figures never come from raw conversions. All-time ones sit beside each affiliate's attributes in
`affiliate_listing` (one row per affiliate once merged), so an all-time page is one scan of the
project's rows: filter, then a partial sort down to the page, with no GROUP BY and no join. A window's
figures are summed over its days for the page's affiliates only, from `affiliate_stats_daily_by_user`
(ordered by affiliate); a page sorted by a windowed figure first sums that one figure for every
affiliate of the window from `affiliate_stats_daily` (ordered by day).
"""

from dataclasses import dataclass, replace
from datetime import date

from rewards.domain.affiliates import LEVELS, Figures, affiliate_json, figures_from_row
from rewards.domain.codes import is_affiliate_code
from rewards.domain.errors import DomainError, ErrorKind
from rewards.domain.payout_config import Tier
from rewards.domain.payouts import User
from rewards.domain.referrals import CodeRecord, code_figures_json
from rewards.ports import Affiliate, CodeFigures, CodeTrafficFigures, StateStore, Warehouse

# sort_by → the affiliate_listing expression an all-time page orders by (numeric figures, not their text)
SORT_EXPRESSIONS = {
    "total_volume": "total_volume",
    **{f"r{n}_volume": f"r{n}_volume" for n in LEVELS},
    "total_earnings": "earnings",
    "referred_users": "referred_users - removed_users",
    "created_at": "created_at",
    "name": "lowerUTF8(name)",
}
# sort_by → what a window sums per affiliate over affiliate_stats_daily (the other sort keys are all time)
WINDOW_SUMS = {
    "total_volume": "sum(" + " + ".join(f"r{n}_volume" for n in LEVELS) + ")",
    **{f"r{n}_volume": f"sum(r{n}_volume)" for n in LEVELS},
    "total_earnings": "sum(earnings)",
}
FILTER_COLUMNS = {"statuses": "status", "regions": "region", "audiences": "audience", "tax_statuses": "tax_status"}
_WINDOWED = [f"r{n}_volume" for n in LEVELS] + ["earnings"]  # the figures a window counts
_PAGE_COLUMNS = "user_key, user_identifier_type, user_identifier, name, created_at, referred_users, removed_users"
# Referred users, less those whose referral was removed since (API.md §7 deleteReferral): named apart (an alias of the
# column's own name would shadow it), read back as `referred_users`.
_REFERRED = "referred_users - removed_users AS referred_now"
_DECIMALS_AS_TEXT = " SETTINGS output_format_json_quote_decimals = 1"  # exact decimals reach Python as text


@dataclass(frozen=True)
class Listing:
    sort_by: str
    descending: bool
    filters: dict[str, tuple[str, ...]]  # FILTER_COLUMNS' keys → accepted values (OR within, AND across)
    tiers: tuple[str, ...] | None
    default_tier: str | None
    search: str | None
    days: tuple[date, date] | None  # the window of volumes and earnings; None: all time
    offset: int
    limit: int


@dataclass(frozen=True)
class Row:
    user: User
    figures: Figures


def matching_conditions(listing: Listing, params: dict) -> list[str]:
    """The project's registered affiliates (`status` is '' until registration) passing filters and search."""
    conditions = ["project_id = {project:String}", "status != ''"]
    for name, values in listing.filters.items():
        conditions.append(f"{FILTER_COLUMNS[name]} IN {{{name}:Array(String)}}")
        params[name] = list(values)
    if listing.tiers is not None:
        conditions.append("ifNull(tier, {default_tier:String}) IN {tiers:Array(String)}")
        params.update(tiers=list(listing.tiers), default_tier=listing.default_tier or "")
    if listing.search:
        conditions.append(
            "(positionCaseInsensitiveUTF8(ifNull(name, ''), {search:String}) > 0"
            " OR positionCaseInsensitiveUTF8(user_identifier, {search:String}) > 0"
            " OR (user_identifier_type, user_identifier) IN (SELECT owner_identifier_type, owner_identifier"
            "  FROM referral_codes WHERE project_id = {project:String}"
            "  AND positionCaseInsensitiveUTF8(code, {search:String}) > 0))"
        )
        params["search"] = listing.search
    return conditions


_WINDOW_DAYS = "day >= {day_from:Date32} AND day <= {day_to:Date32}"


def _count(listing: Listing, matching: str) -> str:
    """The number of matches beside each row of the page. A search leaves few: counting them as they pass
    costs less than matching again; otherwise a second scan costs less than carrying every match to the sort."""
    return "count() OVER ()" if listing.search else f"(SELECT count() FROM {matching})"


def _source(listing: Listing, matching: str) -> tuple[str, str]:
    """What the page is read from and the expression it is sorted by: in a window sorted by a windowed
    figure, that figure alone is summed for every affiliate of the window and joined to the matching ones."""
    if listing.days is None or listing.sort_by not in WINDOW_SUMS:
        return matching, SORT_EXPRESSIONS[listing.sort_by]
    sums = (
        f"SELECT user_key, {WINDOW_SUMS[listing.sort_by]} AS window_value FROM affiliate_stats_daily"
        f" WHERE project_id = {{project:String}} AND {_WINDOW_DAYS} GROUP BY user_key"
    )
    return f"(SELECT {_PAGE_COLUMNS} FROM {matching}) AS a LEFT JOIN ({sums}) AS w USING (user_key)", "window_value"


def page_sql(listing: Listing, project_id: str) -> tuple[str, dict]:
    """The page's affiliates in order with the number of matches, and their all-time figures
    (in a window, only the referred users: `window_figures_sql` gives the rest for the page's affiliates)."""
    params: dict = {"project": project_id, "limit": listing.limit, "offset": listing.offset}
    if listing.days is not None:
        params.update(day_from=listing.days[0].isoformat(), day_to=listing.days[1].isoformat())
    matching = f"affiliate_listing FINAL WHERE {' AND '.join(matching_conditions(listing, params))}"
    source, sort = _source(listing, matching)
    figures = _REFERRED if listing.days is not None else ", ".join([*_WINDOWED, _REFERRED])
    sql = (
        f"SELECT toString(user_key) AS key, user_identifier_type, user_identifier, {figures},"
        f" {_count(listing, matching)} AS total_count FROM {source}"
        f" ORDER BY {sort} {'DESC' if listing.descending else 'ASC'} NULLS LAST,"
        " created_at DESC, user_identifier_type, user_identifier"
        " LIMIT {limit:UInt32} OFFSET {offset:UInt64}" + _DECIMALS_AS_TEXT
    )
    return sql, params


def window_figures_sql(project_id: str, days: tuple[date, date], keys: list[int]) -> tuple[str, dict]:
    """Volumes and earnings of the affiliates (by user_key) summed over the window's days."""
    sums = ", ".join(f"sum(r{n}_volume) AS r{n}_volume" for n in LEVELS) + ", sum(earnings) AS earnings"
    sql = (
        f"SELECT toString(user_key) AS key, {sums} FROM affiliate_stats_daily_by_user"
        f" WHERE project_id = {{project:String}} AND user_key IN {{keys:Array(UInt128)}} AND {_WINDOW_DAYS}"
        " GROUP BY user_key"
    )
    params = {"project": project_id, "day_from": days[0].isoformat(), "day_to": days[1].isoformat(), "keys": keys}
    return sql + _DECIMALS_AS_TEXT, params


async def list_affiliates(warehouse: Warehouse, project_id: str, listing: Listing) -> tuple[list[Row], int]:
    """The page's affiliates (as users; their attributes are the state store's) with their figures."""
    sql, params = page_sql(listing, project_id)
    page = await warehouse.query(sql, params)
    if not page:
        total = 0 if listing.offset == 0 else await _count_past_end(warehouse, sql, params)
        return [], total
    if listing.days is not None:
        page = await _with_window_figures(warehouse, project_id, listing.days, page)
    rows = [
        Row(
            User(r["user_identifier"], r["user_identifier_type"]),
            figures_from_row({**r, "referred_users": r["referred_now"]}),
        )
        for r in page
    ]
    return rows, int(page[0]["total_count"])


async def _with_window_figures(warehouse: Warehouse, project_id: str, days: tuple[date, date], page: list[dict]):
    """The page's rows with volumes and earnings of the window (none in it: zero); referred users stay all time."""
    sql, params = window_figures_sql(project_id, days, [int(r["key"]) for r in page])
    by_key = {r["key"]: r for r in await warehouse.query(sql, params)}
    zero = dict.fromkeys(_WINDOWED, "0")
    return [{**r, **{name: by_key.get(r["key"], zero)[name] for name in _WINDOWED}} for r in page]


async def _count_past_end(warehouse: Warehouse, page: str, params: dict) -> int:
    """The count past the last page (the page query returned no row to carry it)."""
    head = page.rsplit(" LIMIT ", 1)[0]
    rows = await warehouse.query(f"SELECT any(total_count) AS c FROM ({head} LIMIT 1)", params)
    return int(rows[0]["c"] or 0) if rows else 0  # nothing matches at all: any() of no rows is null


# -- one affiliate and its codes (API.md §7: the published client's getAffiliateInfo / getAffiliateCode) -------------

MAX_CODES = 1000  # an affiliate's codes answered at most (the newest, oldest first)


@dataclass(frozen=True)
class AffiliateInfo:
    affiliate: Affiliate
    codes: list[CodeRecord]  # oldest first
    figures: dict[str, dict]  # each code's figures as its answer shows them (code_figures_json), by code
    tier: Tier | None  # its tier, or the configuration's default

    @property
    def updated_at_ms(self) -> int:
        """The latest of the registration and its codes' creations, renames and rebate rate changes."""
        return max([self.affiliate.created_at_ms, *(c.updated_at_ms or c.created_at_ms for c in self.codes)])


class UnknownTiers(DomainError):
    kind = ErrorKind.INVALID


async def listing_page(
    state: StateStore, warehouse: Warehouse, project_id: str, listing: Listing
) -> tuple[list[dict], int]:
    """A page of the listing as GET /affiliates answers it (affiliate_json), and how many affiliates match: the
    figures from the warehouse, the affiliates and their codes from the state store."""
    config = await state.get_config(project_id)
    unknown = [t for t in listing.tiers or () if config.tier(t) is None]
    if unknown:
        raise UnknownTiers(f"tiers must be tier ids of the project configuration (unknown: {', '.join(unknown)})")
    rows, total = await list_affiliates(warehouse, project_id, replace(listing, default_tier=config.default_tier))
    users = [row.user for row in rows]
    affiliates = await state.affiliates_among(project_id, users)
    codes = await state.codes_of(project_id, users)
    results = [
        affiliate_json(affiliates[row.user], config, codes.get(row.user, []), row.figures)
        for row in rows
        if row.user in affiliates
    ]
    return results, total


async def code_available(state: StateStore, project_id: str, code: str) -> bool:
    """`isAffiliateCodeAvailable`: the code (referral or affiliate, any of its names) exists and has uses left."""
    record = await state.get_code(project_id, code)
    return record is not None and record.available


async def code_free(state: StateStore, project_id: str, code: str) -> bool:
    """`isAffiliateCodeFree`: `code` may be chosen as an affiliate code and no code of the project has or had it."""
    return is_affiliate_code(code) and await state.get_code(project_id, code) is None


async def affiliate_info(
    state: StateStore,
    traffic: CodeTrafficFigures | None,
    code_figures: CodeFigures | None,
    project_id: str,
    user: User,
) -> AffiliateInfo | None:
    """The affiliate `user` with every code of its (generated or chosen) and their figures; None if not one."""
    affiliate = await state.get_affiliate(project_id, user)
    if affiliate is None:
        return None
    newest, _ = await state.list_codes(project_id, user, 0, MAX_CODES)
    codes = newest[::-1]
    clicks: dict[str, int] = {}
    if traffic is not None and codes:
        names = [name for record in codes for name in record.all_names]
        clicks = {name: found.clicks for name, found in (await traffic.of_codes(project_id, names)).items()}
    stats = {} if code_figures is None or not codes else await code_figures.of_codes(project_id, codes)
    tier = (await state.get_config(project_id)).effective_tier(affiliate.tier)
    return AffiliateInfo(affiliate, codes, {c.code: code_figures_json(c, clicks, stats) for c in codes}, tier)
