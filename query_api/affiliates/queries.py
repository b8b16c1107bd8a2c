"""The affiliate listing (API.md §4): one query over the registered affiliates joined with their figures.

Figures never come from raw conversions: all-time ones are one row per affiliate in
`affiliate_stats`, windowed ones are summed from `affiliate_stats_daily` over the window's days.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import date

from rewards.affiliates import LEVELS, Figures, figures_from_row
from rewards.domain.payouts import User
from rewards.ports import Affiliate, Warehouse

# sort_by → the expression the listing orders by (numeric figures, not their text)
SORT_EXPRESSIONS = {
    "total_volume": "total_volume_n",
    **{f"r{n}_volume": f"s.v{n}" for n in LEVELS},
    "total_earnings": "s.ev",
    "referred_users": "r.ru",
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
    affiliate: Affiliate
    figures: Figures


def _stats(days: tuple[date, date] | None) -> str:
    sums = ", ".join(f"sum(r{n}_volume) AS v{n}" for n in LEVELS)
    if days is None:
        return (
            f"SELECT user_identifier_type AS t, user_identifier AS u, {sums}, sum(earnings) AS ev"
            " FROM affiliate_stats WHERE project_id = {project:String} GROUP BY t, u"
        )
    return (
        f"SELECT user_identifier_type AS t, user_identifier AS u, {sums}, sum(earnings) AS ev"
        " FROM affiliate_stats_daily WHERE project_id = {project:String}"
        " AND day >= {day_from:Date32} AND day <= {day_to:Date32} GROUP BY t, u"
    )


_REFERRED = (
    "SELECT user_identifier_type AS t, user_identifier AS u, sum(referred_users) AS ru"
    " FROM affiliate_stats WHERE project_id = {project:String} GROUP BY t, u"
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


def listing_sql(listing: Listing, project_id: str) -> tuple[str, dict]:
    params: dict = {"project": project_id, "limit": listing.limit, "offset": listing.offset}
    conditions = _conditions(listing, params)
    if listing.days is not None:
        params.update(day_from=listing.days[0].isoformat(), day_to=listing.days[1].isoformat())
    direction = "DESC" if listing.descending else "ASC"
    volumes = ", ".join(f"toString(s.v{n}) AS r{n}_volume" for n in LEVELS)
    sql = (
        "SELECT a.id AS id, a.user_identifier AS user_identifier, a.user_identifier_type AS user_identifier_type,"
        " a.name AS name, a.status AS status, a.region AS region, a.audience AS audience,"
        " a.tax_status AS tax_status, a.tier AS tier, toUnixTimestamp64Milli(a.created_at) AS created_ms,"
        f" s.v1 + s.v2 + s.v3 + s.v4 AS total_volume_n, {volumes}, toString(s.ev) AS earnings,"
        " r.ru AS referred_users, count() OVER () AS total_count"
        " FROM (SELECT * FROM (SELECT * FROM affiliates FINAL WHERE project_id = {project:String})"
        f"  WHERE {' AND '.join(conditions)}) AS a"
        f" LEFT JOIN ({_stats(listing.days)}) AS s ON s.t = a.user_identifier_type AND s.u = a.user_identifier"
        f" LEFT JOIN ({_REFERRED}) AS r ON r.t = a.user_identifier_type AND r.u = a.user_identifier"
        f" ORDER BY {SORT_EXPRESSIONS[listing.sort_by]} {direction} NULLS LAST,"
        " a.created_at DESC, a.user_identifier_type, a.user_identifier"
        " LIMIT {limit:UInt32} OFFSET {offset:UInt64}"
    )
    return sql, params


async def list_affiliates(warehouse: Warehouse, project_id: str, listing: Listing) -> tuple[list[Row], int]:
    sql, params = listing_sql(listing, project_id)
    rows = await warehouse.query(sql, params)
    if rows:
        total = int(rows[0]["total_count"])
    elif listing.offset == 0:
        total = 0
    else:  # past the last page: the page is empty, the count still tells how many there are
        counted = await warehouse.query(f"SELECT count() AS c FROM ({sql.rsplit(' LIMIT ', 1)[0]})", params)
        total = int(counted[0]["c"])
    return [Row(_affiliate(r), figures_from_row(r)) for r in rows], total


def _affiliate(row: dict) -> Affiliate:
    return Affiliate(
        id=row["id"],
        user=User(row["user_identifier"], row["user_identifier_type"]),
        name=row["name"],
        status=row["status"],
        region=row["region"],
        audience=row["audience"],
        tax_status=row["tax_status"],
        tier=row["tier"],
        created_at_ms=int(row["created_ms"]),
    )


async def codes_of(warehouse: Warehouse, project_id: str, users: list[User]) -> dict[User, list[str]]:
    """The referral codes of a page's affiliates, newest first."""
    if not users:
        return {}
    rows = await warehouse.query(
        "SELECT owner_identifier_type AS t, owner_identifier AS u, code FROM referral_codes FINAL"
        " WHERE project_id = {project:String} AND owner_identifier IN {ids:Array(String)}"
        " ORDER BY created_at DESC, code",
        {"project": project_id, "ids": sorted({user.identifier for user in users})},
    )
    codes: dict[User, list[str]] = defaultdict(list)
    for row in rows:
        codes[User(row["u"], row["t"])].append(row["code"])
    return codes
