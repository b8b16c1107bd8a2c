"""The affiliate portal (API.md §7, the published client's GET /affiliate-portal/...): an affiliate's own figures in a
window of whole UTC days, and the project's totals over its registered affiliates.

Every figure comes from a read model, never from raw conversions or payouts: the per-affiliate, per-day tables of
schemas/clickhouse/011_affiliate_portal.sql (volume, revenue and attributions per level and converting user; earnings
and payout-eligible figures per level and currency; every user's own conversions), its one row per affiliate for the
project's totals, its referrals by referrer key (`referral_edges`), and the §4 listing's `affiliate_stats` (002,
007). An affiliate's rows are a range of each table's sorting key, so a request reads that affiliate's rows only; the
referral tree reads those of each level's referrers, one lookup per level; the total stats read one row per
affiliate.
"""

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal

from query_api.affiliate_portal.figures import (
    DAYS,
    KEY,
    REFERRED_IN_DAYS,
    REFERRER,
    ZERO,
    Earning,
    LevelFigures,
    Matching,
    Scope,
    by_part,
    currency_condition,
    earning_rows,
    earnings_by_currency,
    levels_of,
    part_sql,
)
from rewards.domain import integrity
from rewards.domain.affiliates import LEVELS
from rewards.domain.identifiers import IDENTIFIER_TYPES, InvalidIdentifier, canonical_identifier
from rewards.domain.payout_config import Tier, external_id
from rewards.domain.payouts import POINT, User
from rewards.ports import Affiliate, StateStore, Warehouse
from schemas.clickhouse.values import param_chunks

MAX_TREE_NODES = 10_000  # nodes of a referral tree answered at most: nearer levels first, then older referrals


class NotAnIdentifier(ValueError):
    """A text that is no valid identifier of any type."""


async def affiliate_named(state: StateStore, project_id: str, identifier: str) -> Affiliate | None:
    """The project's affiliate whose identifier this is, whatever its type (the client sends no type): the text is
    tried as each type it is valid for (an EVM address in any case is one address); None if no such affiliate."""
    candidates = []
    for identifier_type in IDENTIFIER_TYPES:
        try:
            candidates.append(User(canonical_identifier(identifier, identifier_type), identifier_type))
        except InvalidIdentifier:
            continue
    if not candidates:
        raise NotAnIdentifier(f"user_identifier is not a valid identifier of any type ({', '.join(IDENTIFIER_TYPES)})")
    found = await state.affiliates_among(project_id, candidates)
    return next((found[user] for user in candidates if user in found), None)


# -- figures -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    levels: dict[int, LevelFigures]  # 1-4
    earnings: dict[int, list[Earning]]  # by level: 1-4 commissions, 0 referral rewards
    end_user_volume: Decimal
    referred_ever: int  # users it referred, all time (a removed referral's too)
    referred_now: int  # less those whose referral was removed


# The stats' four reads in one query, one round trip ({where}: the scope's rows, put in by `replace`): per level, the
# conversions counted for the affiliate; per level and currency, its earnings; its own volume as an end user; §4's
# referred users (affiliate_stats, all time: every referral it made, and those removed since).
STATS_SQL = " UNION ALL ".join(
    [
        part_sql(
            "level", "affiliate_portal_daily WHERE {where} GROUP BY level", level="level",
            volume="toString(sum(volume))", revenue="toString(sum(revenue))", attributions="sum(attributions)",
            traders="uniqExact(trader_key)",
        ),
        part_sql(
            "earning",
            "affiliate_portal_earnings_daily WHERE {where} GROUP BY level, currency, currency_name, currency_decimals",
            level="level", currency="currency", currency_name="currency_name", currency_decimals="currency_decimals",
            amount="toString(sum(amount))",
        ),
        part_sql("own", "user_conversions_daily WHERE {where}", volume="toString(sum(volume))"),
        part_sql(
            "referred", f"affiliate_stats WHERE project_id = {{project:String}} AND user_key = {KEY}",
            referred="sum(referred_users)", removed="sum(removed_users)",
        ),
    ]
)  # fmt: skip


async def stats(warehouse: Warehouse, scope: Scope) -> Stats:
    parts = by_part(await warehouse.query(STATS_SQL.replace("{where}", scope.where()), scope.params()))
    by_level: dict[int, list[dict]] = defaultdict(list)
    for row in parts["earning"]:
        by_level[int(row["level"])].append(row)
    own, referred = parts["own"], parts["referred"]
    referred_ever = int(referred[0]["referred"]) if referred else 0
    removed = int(referred[0]["removed"]) if referred else 0
    return Stats(
        levels=levels_of(parts["level"]),
        earnings={level: earnings_by_currency(by_level[level]) for level in range(0, len(LEVELS) + 1)},
        end_user_volume=Decimal(own[0]["volume"]) if own else ZERO,
        referred_ever=referred_ever,
        referred_now=max(referred_ever - removed, 0),
    )


PAID_SQL = (
    "SELECT level, toString(sum(paid_volume)) AS volume, toString(sum(paid_revenue)) AS revenue,"
    " sum(paid_attributions) AS attributions"
    " FROM affiliate_portal_earnings_daily WHERE {where} AND level BETWEEN 1 AND 4 GROUP BY level"
)


async def paid_by_level(warehouse: Warehouse, scope: Scope) -> dict[int, LevelFigures]:
    """Per level, the conversions whose commission at that level was paid to the affiliate: their value, revenue
    and number."""
    return levels_of(await warehouse.query(PAID_SQL.format(where=scope.where(by_name=False)), scope.params()))


# Users the affiliate referred (level 1) first in the window, who made a conversion counted for it in the window.
NEW_TRADERS_SQL = (
    "SELECT count() AS new_traders FROM (SELECT user_key AS trader_key, toDate32(min(referred_at)) AS day"
    " FROM referral_edges WHERE {referrer} GROUP BY user_key)"
    " WHERE {in_days} AND trader_key IN (SELECT trader_key FROM affiliate_portal_daily WHERE {where} AND level = 1)"
)


async def new_traders(warehouse: Warehouse, scope: Scope) -> int:
    sql = NEW_TRADERS_SQL.format(
        referrer=REFERRER, in_days=DAYS if scope.days else "1", where=scope.where(by_name=False)
    )
    rows = await warehouse.query(sql, scope.params())
    return int(rows[0]["new_traders"]) if rows else 0


# -- the breakdown by day, week or month -------------------------------------------------------------------------

# Where a day's period starts (Date32 arithmetic: toMonday and toStartOfMonth answer a Date, 1970-2149 only).
PERIOD_STARTS = {"day": "{d}", "week": "{d} - toDayOfWeek({d}) + 1", "month": "{d} - toDayOfMonth({d}) + 1"}


@dataclass
class Period:
    volumes: tuple[Decimal, ...] = (ZERO, ZERO, ZERO)  # r1..r3
    revenue: Decimal = ZERO
    attributions: int = 0
    referred_users: int = 0  # users the affiliate referred in the period
    earnings: list[Decimal] = field(default_factory=list)  # in the chosen currency, whole tokens


BREAKDOWN_SQL = (
    "SELECT toString({period}) AS period,"
    + "".join(f" toString(sumIf(volume, level = {n})) AS r{n}_volume," for n in (1, 2, 3))
    + " toString(sum(revenue)) AS revenue, sum(attributions) AS attributions"
    " FROM affiliate_portal_daily WHERE {where} GROUP BY period"
)
BREAKDOWN_EARNINGS_SQL = (
    "SELECT toString({period}) AS period, currency, currency_name, currency_decimals, toString(sum(amount)) AS amount"
    " FROM affiliate_portal_earnings_daily WHERE {where} AND {currency}"
    " GROUP BY period, currency, currency_name, currency_decimals"
)
# Referrals made (a removed one's too: it was made), each once: a removal's row (no identifier) is not one.
BREAKDOWN_REFERRALS_SQL = (
    "SELECT toString({period}) AS period, countIf(user_identifier != '') AS referred FROM referral_edges"
    " WHERE {referrer} AND {in_days} GROUP BY period"
)


async def breakdown(warehouse: Warehouse, scope: Scope, group_by: str, currency: str) -> dict[str, Period]:
    """The window's figures per period (by its first day, ISO), the periods without any left out."""
    start = PERIOD_STARTS[group_by]
    params = {**scope.params(), "currency": currency}
    figures, earnings, referrals = await asyncio.gather(
        warehouse.query(BREAKDOWN_SQL.format(period=start.format(d="day"), where=scope.where()), params),
        warehouse.query(
            BREAKDOWN_EARNINGS_SQL.format(
                period=start.format(d="day"), where=scope.where(), currency=currency_condition(currency)
            ),
            params,
        ),
        warehouse.query(
            BREAKDOWN_REFERRALS_SQL.format(
                period=start.format(d="toDate32(referred_at)"),
                referrer=REFERRER,
                in_days=REFERRED_IN_DAYS,
            ),
            params,
        ),
    )
    periods: dict[str, Period] = defaultdict(Period)
    for row in figures:
        period = periods[row["period"]]
        period.volumes = tuple(Decimal(row[f"r{n}_volume"]) for n in (1, 2, 3))
        period.revenue, period.attributions = Decimal(row["revenue"]), int(row["attributions"])
    for row in earnings:
        periods[row["period"]].earnings += [earning.amount for earning in earnings_by_currency([row])]
    for row in referrals:
        periods[row["period"]].referred_users = int(row["referred"])
    return dict(periods)


# -- the referral tree -------------------------------------------------------------------------------------------


# The live referrals (not removed since: API.md §7 deleteReferral) made by the referrers whose keys `{referrers}`
# holds (an array), the oldest first (the tree keeps the nearer levels and the older referrals when it is cut).
LIVE_REFERRALS = (
    "SELECT toString(referrer_key) AS referrer, toString(user_key) AS key, toString(referred_at) AS at,"
    " max(user_identifier_type) AS user_identifier_type, max(user_identifier) AS user_identifier FROM referral_edges"
    " WHERE project_id = {project:String} AND referrer_key IN {referrers}"
    " GROUP BY referrer_key, user_key, referred_at HAVING max(removed) = 0"
    " ORDER BY referred_at, user_identifier LIMIT {limit:UInt32}"
)
# Each user's own conversions counted for the tree's root, all time.
TREE_FIGURES = (
    "SELECT toString(trader_key) AS key, toString(sum(volume)) AS volume, toString(sum(revenue)) AS revenue,"
    " sum(attributions) AS attributions FROM affiliate_portal_daily"
    f" WHERE project_id = {{project:String}} AND user_key = {KEY} GROUP BY trader_key"
)


def _key_cost(key: str) -> int:
    return len(key) + 1  # digits and a comma in the array literal


async def _referred_by(warehouse: Warehouse, scope: Scope, referrers: list[str] | None, limit: int) -> list[dict]:
    """The live referrals of the referrers (their keys; None: the scope's affiliate), at most `limit`, oldest first:
    one lookup of the sorting key per chunk of keys (a query parameter's text is bounded)."""
    params = {**scope.params(), "limit": limit}
    if referrers is None:
        return await warehouse.query(LIVE_REFERRALS.replace("{referrers}", f"[{KEY}]"), params)
    sql = LIVE_REFERRALS.replace("{referrers}", "{referrers:Array(UInt128)}")
    rows = []
    for chunk in param_chunks(referrers, cost=_key_cost):
        rows += await warehouse.query(sql, {**params, "referrers": [int(key) for key in chunk]})
    return sorted(rows, key=lambda row: (row["at"], row["user_identifier"]))[:limit]


async def _levels_below(warehouse: Warehouse, state: StateStore, scope: Scope) -> tuple[list[list[dict]], dict]:
    """The referrals of each level below the affiliate, down to its level 4 (level n + 1: those the users of level n
    made), MAX_TREE_NODES at most in all, one query per level; and which of their users are affiliates (the state
    store is asked about a level while the warehouse reads the next)."""
    levels: list[list[dict]] = []
    affiliates: list[asyncio.Task] = []
    referrers, budget = None, MAX_TREE_NODES
    for _ in LEVELS:
        if budget == 0 or referrers == []:
            break
        levels.append(await _referred_by(warehouse, scope, referrers, budget))
        users = [User(row["user_identifier"], row["user_identifier_type"]) for row in levels[-1]]
        affiliates.append(asyncio.ensure_future(state.affiliates_among(scope.project_id, users)))
        referrers = [row["key"] for row in levels[-1]]
        budget -= len(levels[-1])
    return levels, {user: a.id for found in await asyncio.gather(*affiliates) for user, a in found.items()}


@dataclass
class Node:
    user: User
    figures: LevelFigures  # the user's own conversions counted for the tree's root, all time
    children: list["Node"] = field(default_factory=list)
    affiliate_id: str | None = None
    flagged: bool = False  # the user is one of the referrers above it in the tree (API.md §8: self-referral)


async def referral_tree(warehouse: Warehouse, state: StateStore, scope: Scope, root: Affiliate) -> Node:
    """The users below `root` in the live referrals down to its level 4 (at most MAX_TREE_NODES, nearer levels and
    older referrals first), each with its own conversions counted for the root."""
    (levels, affiliate_ids), figure_rows = await asyncio.gather(
        _levels_below(warehouse, state, scope), warehouse.query(TREE_FIGURES, scope.params())
    )
    figures = {
        row["key"]: LevelFigures(Decimal(row["volume"]), Decimal(row["revenue"]), int(row["attributions"]))
        for row in figure_rows
    }
    top = Node(root.user, LevelFigures(), affiliate_id=root.id)
    nodes: dict[str, Node] = {}
    for level, rows in enumerate(levels, start=1):
        for row in rows:
            parent = top if level == 1 else nodes.get(row["referrer"])
            if parent is None or row["key"] in nodes:  # a user met already (a referral loop)
                continue
            user = User(row["user_identifier"], row["user_identifier_type"])
            own = figures.get(row["key"], LevelFigures())
            nodes[row["key"]] = Node(user, own, affiliate_id=affiliate_ids.get(user))
            parent.children.append(nodes[row["key"]])
    await _flag_self_referrals(state, scope.project_id, top)
    return top


async def _flag_self_referrals(state: StateStore, project_id: str, top: Node) -> None:
    """Flag each node that is one of its ancestors in the tree (its referrers up to the root) by what the service
    can see (rewards.domain.integrity.self_referrers): one read of every node's tracking ids."""
    paths: list[tuple[Node, list[User]]] = []
    stack = [(child, [top.user]) for child in top.children]
    while stack:
        node, above = stack.pop()
        paths.append((node, above))
        stack += [(child, [node.user, *above]) for child in node.children]
    if not paths:
        return
    tracking = await state.tracking_ids_of(project_id, [top.user, *(node.user for node, _ in paths)])
    for node, above in paths:
        node.flagged = bool(integrity.self_referrers(node.user, above, tracking))


# -- the project's totals over its affiliates --------------------------------------------------------------------


@dataclass(frozen=True)
class Totals:
    affiliates: int
    active: int
    suspended: int
    regions: int  # distinct region labels
    referred_users: int
    level1: LevelFigures  # each conversion once, for its user's direct referrer
    earnings: list[Earning]


# One row per affiliate (FINAL folds the unmerged ones): filtered, then summed, with no join.
TOTALS_SQL = (
    "SELECT count() AS affiliates, countIf(status = 'active') AS active, countIf(status = 'suspended') AS suspended,"
    " uniqExact(region) AS regions, sum(referred_users) - sum(removed_users) AS referred,"
    " toString(sum(volume)) AS volume, toString(sum(revenue)) AS revenue, sum(attributions) AS attributions,"
    " mapApply((currency, amount) -> (currency, toString(amount)), sumMap(earnings)) AS earnings"
    " FROM affiliate_portal_totals FINAL WHERE {conditions}"
)


async def totals(warehouse: Warehouse, project_id: str, matching: Matching) -> Totals:
    params = {"project": project_id}
    rows = await warehouse.query(TOTALS_SQL.format(conditions=matching.conditions(params)), params)
    row = rows[0]
    return Totals(
        affiliates=int(row["affiliates"]),
        active=int(row["active"]),
        suspended=int(row["suspended"]),
        regions=int(row["regions"]),
        referred_users=max(int(row["referred"] or 0), 0),
        level1=LevelFigures(Decimal(row["volume"]), Decimal(row["revenue"]), int(row["attributions"])),
        earnings=earnings_by_currency(earning_rows(row["earnings"])),
    )


# -- what the answers take from the project's configuration and codes (the state store) --------------------------


async def conversion_names(
    state: StateStore, project_id: str, external_id_asked: int | None, name: str | None
) -> tuple[str, ...] | None:
    """The conversions the figures count, by name: `external_id_asked` names the configuration's conversion of that
    external id (what GET /conversions answers for it); both given, a conversion must be both. None: every one."""
    if external_id_asked is None and name is None:
        return None
    names = {name} if name is not None else None
    if external_id_asked is not None:
        conversions = (await state.get_config(project_id)).conversions
        numbered = {c.event_name for c in conversions if external_id(c.event_name) == external_id_asked}
        names = numbered if names is None else names & numbered
    return tuple(sorted(names))


async def codes_and_tier(state: StateStore, project_id: str, affiliate: Affiliate) -> tuple[list[str], Tier | None]:
    """The affiliate's codes and its tier (or the configuration's default)."""
    codes = (await state.codes_of(project_id, [affiliate.user])).get(affiliate.user, [])
    return codes, (await state.get_config(project_id)).effective_tier(affiliate.tier)


async def currency_label(state: StateStore, project_id: str, currency_id: str) -> str:
    """How the portal names a currency: `point`, or a token's name (as the configuration has it)."""
    if currency_id.lower() == POINT:
        return POINT
    for conversion in (await state.get_config(project_id)).conversions:
        token = conversion.currency
        if token != POINT and currency_id.lower() in (token.address.lower(), token.name.lower()):
            return token.name
    return currency_id
