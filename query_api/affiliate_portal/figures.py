"""What the affiliate portal's reads share (their use cases: service.py): an affiliate's rows in the read models
(schemas/clickhouse/011_affiliate_portal.sql) and the SQL that names them, the figures read from them, and the
filters on the project's affiliates. Pure: none of it reads a store."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from rewards.domain.affiliates import LEVELS
from rewards.domain.amounts import exact_sum
from rewards.domain.payouts import POINT, User

ZERO = Decimal(0)
# The affiliate's (or a user's) key in the read models: a 128-bit hash of its identifier type and identifier.
KEY = "reinterpretAsUInt128(sipHash128({type:String}, {id:String}))"
DAYS = "day BETWEEN {first:Date32} AND {last:Date32}"
REFERRED_IN_DAYS = "toDate32(referred_at) BETWEEN {first:Date32} AND {last:Date32}"
REFERRER = f"project_id = {{project:String}} AND referrer_key = {KEY}"  # the affiliate's rows of referral_edges


@dataclass(frozen=True)
class Scope:
    """One affiliate's figures: in `days` (first and last, inclusive; None: all time), of the conversions named
    `names` (None: every conversion; empty: none)."""

    project_id: str
    affiliate: User
    days: tuple[date, date] | None = None
    names: tuple[str, ...] | None = None

    def params(self) -> dict:
        params = {"project": self.project_id, "type": self.affiliate.identifier_type, "id": self.affiliate.identifier}
        if self.days is not None:
            params.update(first=self.days[0].isoformat(), last=self.days[1].isoformat())
        if self.names is not None:
            params["names"] = list(self.names)
        return params

    def where(self, *, by_name: bool = True) -> str:
        """The rows of the affiliate (by `user_key`) in the window (by `day`), of the conversions named (by `name`)."""
        conditions = ["project_id = {project:String}", f"user_key = {KEY}"]
        if self.days is not None:
            conditions.append(DAYS)
        if by_name and self.names is not None:
            conditions.append("name IN {names:Array(String)}")
        return " AND ".join(conditions)


@dataclass(frozen=True)
class LevelFigures:
    volume: Decimal = ZERO
    revenue: Decimal = ZERO
    attributions: int = 0
    traders: int = 0  # distinct converting users


@dataclass(frozen=True)
class Earning:
    currency: str  # "point", or the token's name
    amount: Decimal  # points, or whole tokens (the raw units divided by 10^decimals)


def earnings_by_currency(rows: list[dict]) -> list[Earning]:
    """Rows of (currency, currency_name, currency_decimals, amount) summed per currency name, in whole tokens: a token
    of one name on several chains (USDC on two of them) is one currency."""
    amounts: dict[str, list[Decimal]] = defaultdict(list)
    for row in rows:
        if row["currency"] == POINT:
            amounts[POINT].append(Decimal(row["amount"]))
        else:
            amounts[row["currency_name"]].append(Decimal(row["amount"]).scaleb(-int(row["currency_decimals"])))
    return [Earning(currency, exact_sum(values)) for currency, values in sorted(amounts.items())]


def levels_of(rows: list[dict]) -> dict[int, LevelFigures]:
    """Rows of (level, volume, revenue, attributions[, traders]) as each level's figures (1-4; none: zeros)."""
    found = {
        int(row["level"]): LevelFigures(
            Decimal(row["volume"]), Decimal(row["revenue"]), int(row["attributions"]), int(row.get("traders", 0))
        )
        for row in rows
    }
    return {level: found.get(level, LevelFigures()) for level in LEVELS}


# The columns of a read that answers several parts in one query (UNION ALL), and what a part without one answers.
PART_COLUMNS = {
    "level": "toUInt8(0)", "currency": "''", "currency_name": "''", "currency_decimals": "toUInt8(0)",
    "volume": "'0'", "revenue": "'0'", "attributions": "toUInt64(0)", "traders": "toUInt64(0)", "amount": "'0'",
    "referred": "toUInt64(0)", "removed": "toUInt64(0)",
}  # fmt: skip


def part_sql(part: str, source: str, **columns: str) -> str:
    """One part of such a read: `SELECT '<part>' AS part, <every column> FROM <source>`."""
    values = ", ".join(f"{columns.get(name, default)} AS {name}" for name, default in PART_COLUMNS.items())
    return f"SELECT '{part}' AS part, {values} FROM {source}"


def by_part(rows: list[dict]) -> dict[str, list[dict]]:
    parts: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        parts[row["part"]].append(row)
    return parts


def currency_condition(currency: str) -> str:
    """The rows of one currency: points, or a token named by its address or its name (any case)."""
    if currency.lower() == POINT:
        return "currency = 'point'"
    return (
        "currency != 'point'"
        " AND (lower(currency) = lower({currency:String}) OR lower(currency_name) = lower({currency:String}))"
    )


def earning_rows(earnings: dict[str, str]) -> list[dict]:
    """affiliate_portal_totals' earnings (by `point`, or `<decimals>:<name>` of a token) as rows of currencies."""
    rows = []
    for key, amount in earnings.items():
        if key == POINT:
            rows.append({"currency": POINT, "currency_name": "", "currency_decimals": 0, "amount": amount})
        else:
            decimals, name = key.split(":", 1)
            rows.append({"currency": key, "currency_name": name, "currency_decimals": decimals, "amount": amount})
    return rows


@dataclass(frozen=True)
class Matching:
    """Registered affiliates passing the filters (each None: no filter; OR within a filter, AND across)."""

    statuses: tuple[str, ...] | None = None  # §4 statuses
    regions: tuple[str, ...] | None = None  # region labels, upper-case (ASCII)
    other_regions_than: tuple[str, ...] | None = None  # also any region label none of these (upper-case) names
    audiences: tuple[str, ...] | None = None

    def conditions(self, params: dict) -> str:
        """On a table of affiliates' `status` ('' until registered), `region` and `audience`."""
        conditions = ["project_id = {project:String}", "status != ''"]
        if self.statuses is not None:
            conditions.append("status IN {statuses:Array(String)}")
            params["statuses"] = list(self.statuses)
        if self.regions is not None or self.other_regions_than is not None:
            regions = ["upper(ifNull(region, '')) IN {regions:Array(String)}"]
            params["regions"] = list(self.regions or ())
            if self.other_regions_than is not None:
                regions.append("(region IS NOT NULL AND upper(region) NOT IN {known_regions:Array(String)})")
                params["known_regions"] = list(self.other_regions_than)
            conditions.append(f"({' OR '.join(regions)})")
        if self.audiences is not None:
            conditions.append("audience IN {audiences:Array(String)}")
            params["audiences"] = list(self.audiences)
        return " AND ".join(conditions)
