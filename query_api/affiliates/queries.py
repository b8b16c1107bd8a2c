"""The affiliate listing (API.md §4): one query over the registered affiliates joined with their figures.

Figures never come from raw conversions: all-time ones are one row per affiliate in
`affiliate_stats`, windowed ones are summed from `affiliate_stats_daily` over the window's days.
"""

from dataclasses import dataclass
from datetime import date

from rewards.affiliates import LEVELS, Figures, figures_from_row
from rewards.domain.payouts import User
from rewards.ports import Warehouse

# sort_by → the expression the listing orders by (numeric figures, not their text)
SORT_EXPRESSIONS = {
    "total_volume": "total_volume_n",
    **{f"r{n}_volume": f"s.v{n}" for n in LEVELS},
    "total_earnings": "s.ev",
    "referred_users": "s.ru",
    "created_at": "a.created_at",
    "name": "lower(a.name)",
}
FILTER_COLUMNS = {"statuses": "status", "regions": "region", "audiences": "audience", "tax_statuses": "tax_status"}


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


def _stats(days: tuple[date, date] | None) -> str:
    """Figures per user_key: all time, or volumes and earnings summed over the window's days."""
    sums = ", ".join(f"sum(r{n}_volume) AS v{n}" for n in LEVELS)
    if days is None:
        return (
            f"SELECT user_key, {sums}, sum(earnings) AS ev, sum(referred_users) AS ru FROM affiliate_stats"
            f" WHERE project_id = {{project:String}} GROUP BY user_key"
        )
    return (
        f"SELECT user_key, w.v1 AS v1, w.v2 AS v2, w.v3 AS v3, w.v4 AS v4, w.ev AS ev, r.ru AS ru FROM ("
        f"SELECT user_key, {sums}, sum(earnings) AS ev FROM affiliate_stats_daily WHERE project_id = {{project:String}}"
        f" AND day >= {{day_from:Date32}} AND day <= {{day_to:Date32}} GROUP BY user_key) AS w"
        " FULL JOIN (SELECT user_key, sum(referred_users) AS ru FROM affiliate_stats"
        f" WHERE project_id = {{project:String}} GROUP BY user_key) AS r USING (user_key)"
    )


def _conditions(listing: Listing, params: dict) -> list[str]:
    conditions = ["1"]
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


def page_sql(listing: Listing, project_id: str) -> tuple[str, dict]:
    """The page's affiliates (their identifiers) in order, their figures, and the number of matches.

    Only the columns the order needs travel through the join; the page's attributes are read after,
    by primary key, for its few affiliates. The figures stand on the left of a RIGHT JOIN: ClickHouse builds its hash
    table from the right side, here the (usually filtered) affiliates, much smaller than the figures."""
    params: dict = {"project": project_id, "limit": listing.limit, "offset": listing.offset}
    if listing.days is not None:
        params.update(day_from=listing.days[0].isoformat(), day_to=listing.days[1].isoformat())
    matching = (
        "SELECT user_key, user_identifier_type, user_identifier, name, created_at"
        " FROM (SELECT * FROM affiliates FINAL WHERE project_id = {project:String})"
        f" WHERE {' AND '.join(_conditions(listing, params))}"
    )
    sql = (
        "SELECT a.user_identifier_type AS user_identifier_type, a.user_identifier AS user_identifier,"
        f" s.v1 + s.v2 + s.v3 + s.v4 AS total_volume_n, {_FIGURES}, (SELECT count() FROM ({matching})) AS total_count"
        f" FROM ({_stats(listing.days)}) AS s RIGHT JOIN ({matching}) AS a ON s.user_key = a.user_key"
        f" ORDER BY {SORT_EXPRESSIONS[listing.sort_by]} {'DESC' if listing.descending else 'ASC'} NULLS LAST,"
        " a.created_at DESC, a.user_identifier_type, a.user_identifier"
        " LIMIT {limit:UInt32} OFFSET {offset:UInt64}"
        " SETTINGS output_format_json_quote_decimals = 1"  # exact decimals reach Python as text
    )
    return sql, params


_FIGURES = ", ".join(f"s.v{n} AS r{n}_volume" for n in LEVELS) + ", s.ev AS earnings, s.ru AS referred_users"


async def list_affiliates(warehouse: Warehouse, project_id: str, listing: Listing) -> tuple[list[Row], int]:
    """The page's affiliates (as users; their attributes are the state store's) with their figures."""
    sql, params = page_sql(listing, project_id)
    page = await warehouse.query(sql, params)
    if not page:
        total = 0 if listing.offset == 0 else await _count(warehouse, sql, params)
        return [], total
    rows = [Row(User(r["user_identifier"], r["user_identifier_type"]), figures_from_row(r)) for r in page]
    return rows, int(page[0]["total_count"])


async def _count(warehouse: Warehouse, page: str, params: dict) -> int:
    """The count past the last page (the page query returned no row to carry it)."""
    head = page.rsplit(" LIMIT ", 1)[0]
    rows = await warehouse.query(f"SELECT any(total_count) AS c FROM ({head} LIMIT 1)", params)
    return int(rows[0]["c"]) if rows else 0
