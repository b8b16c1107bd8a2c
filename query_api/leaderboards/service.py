"""The published client's leaderboards (API.md §7) from the warehouse's pre-aggregated figures, and the ranking every
leaderboard shares (§1: ties share a rank, 1, 2, 2, 4; then by identifier).

Volume, revenue, attributions and referred users come from `leaderboard_figures` (schemas/clickhouse/008), one row per
user, side and currency there once merged: `side` 'user' holds a user's own figures, 'affiliate' its figures as a
referrer. Points come from `point_totals_by_user` (001), whose roles are named like the sides."""

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from rewards.domain.amounts import exact_sum
from rewards.domain.payouts import User
from rewards.ports import StateStore, Warehouse

USER, AFFILIATE = "user", "affiliate"
# user_type (API.md §7) → the sides counted: `affiliate` as a referrer, `end_user` as the user, absent both.
SIDES = {"affiliate": (AFFILIATE,), "end_user": (USER,), None: (USER, AFFILIATE)}


@dataclass(frozen=True)
class Ranked:
    rank: int
    user: User
    total: Decimal
    columns: dict  # the board's own columns, as the warehouse answered them


async def rank(
    warehouse: Warehouse, totals: str, params: dict, page: tuple[int, int], user: User | None, columns: Sequence = ()
) -> tuple[list[Ranked], int]:
    """Rank the rows of `totals` (a query of `t`, `u`, `total` and `columns`, one row per user) by total, and answer
    the page (offset, limit) of them, or only `user`'s row (with its rank among all), and how many are ranked."""
    count_rows = await warehouse.query(f"SELECT count() AS c FROM ({totals})", params)
    count = int(count_rows[0]["c"]) if count_rows else 0
    picked = ", ".join(["t", "u", *columns])
    # The total's text gets its own alias: ClickHouse aliases shadow columns, even inside the window.
    ranked = (
        f"SELECT {picked}, toString(total) AS total_text, rank() OVER (ORDER BY total DESC) AS rank FROM ({totals})"
    )
    if user is None:
        offset, limit = page
        sql = f"SELECT * FROM ({ranked}) ORDER BY rank, u, t LIMIT {{limit:UInt32}} OFFSET {{offset:UInt64}}"
        params = {**params, "limit": limit, "offset": offset}
    else:
        sql = f"SELECT * FROM ({ranked}) WHERE t = {{user_type:String}} AND u = {{user_id:String}}"
        params = {**params, "user_type": user.identifier_type, "user_id": user.identifier}
    rows = await warehouse.query(sql, params)
    ranked_rows = [
        Ranked(int(r["rank"]), User(r["u"], r["t"]), Decimal(r["total_text"]), {c: r[c] for c in columns}) for r in rows
    ]
    return ranked_rows, count


def _currency_condition(column: str, currency: str | None) -> str:
    return "1" if currency is None else f"{column} = {{currency:String}}"


def _figures_totals(figure: str, currency_column: str, chain_column: str, currency: str | None) -> str:
    """One figure (volume or revenue) per user over the sides asked: of the amounts in `currency` when given, else
    as counted in the project's volume currency (`counted_*`: rewards.domain.figure_currency); users with none are not
    ranked."""
    column = figure if currency is not None else f"counted_{figure}"
    return (
        f"SELECT user_identifier_type AS t, user_identifier AS u, sum({column}) AS total,"
        f" max({chain_column}) AS chain FROM leaderboard_figures"
        " WHERE project_id = {project:String} AND side IN {sides:Array(String)}"
        f" AND {_currency_condition(currency_column, currency)} GROUP BY t, u HAVING total > 0"
    )


def _board_params(project_id: str, sides: Sequence[str], currency: str | None) -> dict:
    params = {"project": project_id, "sides": list(sides)}
    return params if currency is None else {**params, "currency": currency}


async def volume_board(
    warehouse: Warehouse,
    project_id: str,
    sides: Sequence[str],
    currency: str | None,
    page: tuple[int, int],
    user: User | None,
) -> tuple[list[Ranked], int]:
    """Users by volume (args.value.amount of conversions) on `sides`; column `chain`: the chain its currency names."""
    totals = _figures_totals("volume", "value_currency", "value_chain", currency)
    return await rank(warehouse, totals, _board_params(project_id, sides, currency), page, user, ["chain"])


async def revenue_board(
    warehouse: Warehouse,
    project_id: str,
    sides: Sequence[str],
    currency: str | None,
    page: tuple[int, int],
    user: User | None,
) -> tuple[list[Ranked], int]:
    """Users by revenue (args.revenue.amount of conversions) on `sides`."""
    totals = _figures_totals("revenue", "revenue_currency", "revenue_chain", currency)
    return await rank(warehouse, totals, _board_params(project_id, sides, currency), page, user, ["chain"])


POINTS_TOTALS = (
    "SELECT recipient_identifier_type AS t, recipient_identifier AS u, sum(amount) AS total"
    " FROM point_totals_by_user WHERE project_id = {project:String} GROUP BY t, u"
)


async def points_board(
    warehouse: Warehouse, project_id: str, page: tuple[int, int], user: User | None
) -> tuple[list[Ranked], int]:
    """Users by every point they earned, as users and as affiliates, all time."""
    return await rank(warehouse, POINTS_TOTALS, {"project": project_id}, page, user)


# Referred users less those whose referral was removed since; Int64, so that a removal counted before its referral
# (rows not merged yet) never wraps around.
REFERRED_TOTALS = (
    "SELECT user_identifier_type AS t, user_identifier AS u,"
    " toInt64(sum(referred_users)) - toInt64(sum(removed_users)) AS total FROM leaderboard_figures"
    " WHERE project_id = {project:String} AND side = 'affiliate' GROUP BY t, u HAVING total > 0"
)


async def referred_board(warehouse: Warehouse, project_id: str, page: tuple[int, int]) -> tuple[list[Ranked], int]:
    """Referrers by the users they referred (level 1)."""
    return await rank(warehouse, REFERRED_TOTALS, {"project": project_id}, page, None)


@dataclass(frozen=True)
class Figures:
    """A user's figures on one side (or summed over sides)."""

    volume: Decimal = Decimal(0)
    revenue: Decimal = Decimal(0)
    attributions: int = 0
    referred_users: int = 0

    def __add__(self, other: "Figures") -> "Figures":
        return Figures(  # exact: Decimal's `+` rounds to 28 digits
            exact_sum((self.volume, other.volume)),
            exact_sum((self.revenue, other.revenue)),
            self.attributions + other.attributions,
            self.referred_users + other.referred_users,
        )


@dataclass(frozen=True)
class UserFigures:
    """Each side's figures of some users, each figure of `Figures` summed over the sides asked by `of`."""

    by_side: dict[tuple[str, User], Figures]

    def of(self, user: User, sides: Sequence[str]) -> Figures:
        total = Figures()
        for side in sides:
            total = total + self.by_side.get((side, user), Figures())
        return total


async def figures_of(
    warehouse: Warehouse, project_id: str, users: Sequence[User], currency: str | None = None
) -> UserFigures:
    """The figures of `users` (a page's: at most 100) on each side; volume and revenue of the amounts in `currency`
    when given, else as counted in the project's volume currency (attributions and referred users whatever the
    currency)."""
    if not users:
        return UserFigures({})
    volume, revenue = ("volume", "revenue") if currency is not None else ("counted_volume", "counted_revenue")
    sql = (
        "SELECT side, user_identifier_type AS t, user_identifier AS u,"
        f" toString(sumIf({volume}, {_currency_condition('value_currency', currency)})) AS volume,"
        f" toString(sumIf({revenue}, {_currency_condition('revenue_currency', currency)})) AS revenue,"
        " toString(sum(attributions)) AS attributions,"
        " toString(toInt64(sum(referred_users)) - toInt64(sum(removed_users))) AS referred"
        " FROM leaderboard_figures WHERE project_id = {project:String} AND user_identifier IN {ids:Array(String)}"
        " GROUP BY side, t, u"
    )
    params = {"project": project_id, "ids": sorted({user.identifier for user in users})}
    if currency is not None:
        params["currency"] = currency
    rows = await warehouse.query(sql, params)
    return UserFigures({
        (r["side"], User(r["u"], r["t"])): Figures(
            Decimal(r["volume"]), Decimal(r["revenue"]), int(r["attributions"]), max(int(r["referred"]), 0)
        )
        for r in rows
    })  # fmt: skip


async def points_of(
    warehouse: Warehouse, project_id: str, users: Sequence[User], roles: Sequence[str]
) -> dict[User, Decimal]:
    """The points `users` earned in `roles` (the sides' names), all time."""
    if not users:
        return {}
    rows = await warehouse.query(
        "SELECT recipient_identifier_type AS t, recipient_identifier AS u, toString(sum(amount)) AS total"
        " FROM point_totals_by_user WHERE project_id = {project:String} AND role IN {roles:Array(String)}"
        " AND recipient_identifier IN {ids:Array(String)} GROUP BY t, u",
        {"project": project_id, "roles": list(roles), "ids": sorted({user.identifier for user in users})},
    )
    return {User(r["u"], r["t"]): Decimal(r["total"]) for r in rows}


# -- the state store's part of a row: its owner's code and tier (the optional fields) ---------------------------


async def affiliate_codes(state: StateStore, project_id: str, users: Sequence[User]) -> dict[User, str]:
    """Each user's oldest code (the one the client's `Affiliate.code` shows), for those who have one."""
    codes = await state.codes_of(project_id, users) if users else {}
    return {user: names[-1] for user, names in codes.items()}  # codes_of lists them newest first


async def effective_tiers(state: StateStore, project_id: str, users: Sequence[User]) -> dict[User, dict[str, str]]:
    """Each user's effective tier (its own as a registered affiliate, else the default) as `{tier id: tier name}`;
    `{}` without one."""
    config = await state.get_config(project_id)
    affiliates = await state.affiliates_among(project_id, users) if users else {}
    tiers = {}
    for user in users:
        tier = config.effective_tier(affiliates[user].tier if user in affiliates else None)
        tiers[user] = {} if tier is None else {tier.id: tier.name}
    return tiers


async def optional_fields(
    state: StateStore, project_id: str, users: Sequence[User], chosen: frozenset[str], figures: UserFigures
) -> dict[User, dict]:
    """The fields of `chosen` for each of `users`: referred figures as a referrer (all levels), end-user ones as the
    user."""
    codes = await affiliate_codes(state, project_id, users) if "affiliate_code" in chosen else {}
    tiers = await effective_tiers(state, project_id, users) if "tiers" in chosen else {}
    extras = {}
    for user in users:
        referred = figures.of(user, (AFFILIATE,))
        own = figures.of(user, (USER,))
        every: dict[str, object] = {
            "affiliate_code": codes.get(user),
            "tiers": tiers.get(user),
            "referred_volume": referred.volume,
            "referred_users": referred.referred_users,
            "enduser_volume": own.volume,
            "enduser_revenue": own.revenue,
        }
        extras[user] = {name: value for name, value in every.items() if name in chosen}
    return extras
