"""Payout read models: SQL over the materialized views of schemas/clickhouse (API.md §1)."""

from dataclasses import dataclass
from decimal import Decimal

from rewards.domain.limits import MAX_MS, MIN_MS, clamp_time_ms
from rewards.domain.payouts import User
from rewards.ports import Warehouse
from schemas.clickhouse.values import ch_datetime

# `rebate`: a referred user's share of a level-1 commission through a code with a rebate rate (API.md §7), earned as a
# user (leaderboard/users); the commission's other share stays `affiliate_commission`.
KINDS = ("affiliate_commission", "referral_reward", "end_user_reward", "campaign_bonus", "rebate")
HOUR_MS = 3_600_000
DT = "DateTime64(3, 'UTC')"


async def project_total(warehouse: Warehouse, project_id: str) -> Decimal:
    rows = await warehouse.query(
        "SELECT toString(sum(amount)) AS total FROM point_totals_by_project WHERE project_id = {project:String}",
        {"project": project_id},
    )
    return Decimal(rows[0]["total"]) if rows else Decimal(0)


async def user_totals(warehouse: Warehouse, project_id: str, user: User) -> dict[str, Decimal]:
    rows = await warehouse.query(
        "SELECT kind, toString(sum(amount)) AS total FROM point_totals_by_user "
        "WHERE project_id = {project:String} AND recipient_identifier_type = {type:String} "
        "AND recipient_identifier = {id:String} GROUP BY kind",
        {"project": project_id, "type": user.identifier_type, "id": user.identifier},
    )
    totals = dict.fromkeys(KINDS, Decimal(0))
    totals.update({row["kind"]: Decimal(row["total"]) for row in rows})
    return totals


@dataclass(frozen=True)
class Ranked:
    rank: int
    user: User
    total: Decimal
    attributions: int


def _totals_sql(window: tuple[int | None, int | None]) -> tuple[str, dict]:
    """Per-user totals of one role: all time from the totals view, or within [from, to] from the
    hourly view plus raw payouts for the partial hours at the edges (exact to the millisecond)."""
    start, end = window
    if start is None and end is None:
        return (
            "SELECT recipient_identifier_type AS t, recipient_identifier AS u, sum(amount) AS total, "
            "sum(payouts) AS n FROM point_totals_by_user WHERE project_id = {project:String} AND role = {role:String} "
            "GROUP BY t, u",
            {},
        )
    # Bounds beyond what DateTime64 holds are clamped: no payout can lie outside it.
    start = MIN_MS if start is None else clamp_time_ms(start)
    end = MAX_MS if end is None else clamp_time_ms(end)
    whole_from = -(-start // HOUR_MS) * HOUR_MS  # first whole hour inside the window
    whole_to = (end + 1) // HOUR_MS * HOUR_MS  # end of the last whole hour inside it
    if whole_to <= whole_from:
        whole_from = whole_to = start
    sql = (
        "SELECT t, u, sum(total) AS total, sum(n) AS n FROM ("
        " SELECT recipient_identifier_type AS t, recipient_identifier AS u, sum(amount) AS total, sum(payouts) AS n"
        " FROM point_totals_by_user_hour WHERE project_id = {project:String} AND role = {role:String}"
        f" AND hour >= {{whole_from:{DT}}} AND hour < {{whole_to:{DT}}} GROUP BY t, u"
        " UNION ALL"
        " SELECT recipient_identifier_type AS t, recipient_identifier AS u, sum(amount) AS total, count() AS n"
        " FROM payouts WHERE project_id = {project:String} AND role = {role:String} AND currency = 'point'"
        f" AND ((happened_at >= {{start:{DT}}} AND happened_at < {{whole_from:{DT}}})"
        f"   OR (happened_at >= {{whole_to:{DT}}} AND happened_at <= {{end:{DT}}}))"
        " GROUP BY t, u"
        ") GROUP BY t, u"
    )
    params = {name: ch_datetime(ms) for name, ms in
              (("start", start), ("end", end), ("whole_from", whole_from), ("whole_to", whole_to))}  # fmt: skip
    return sql, params


async def leaderboard(
    warehouse: Warehouse,
    project_id: str,
    role: str,
    window: tuple[int | None, int | None],
    offset: int,
    limit: int,
    user: User | None,
) -> tuple[list[Ranked], int]:
    """Ranked rows (ties share a rank: 1, 2, 2, 4) and the number of ranked users."""
    totals, params = _totals_sql(window)
    params = {**params, "project": project_id, "role": role}
    count_rows = await warehouse.query(f"SELECT count() AS c FROM ({totals})", params)
    count = int(count_rows[0]["c"]) if count_rows else 0
    # The total's text gets its own alias: ClickHouse aliases shadow columns, even inside the window.
    ranked = f"SELECT t, u, toString(total) AS total_text, n, rank() OVER (ORDER BY total DESC) AS rank FROM ({totals})"
    if user is None:
        sql = f"SELECT * FROM ({ranked}) ORDER BY rank, u LIMIT {{limit:UInt32}} OFFSET {{offset:UInt64}}"
        params = {**params, "limit": limit, "offset": offset}
    else:
        sql = f"SELECT * FROM ({ranked}) WHERE t = {{user_type:String}} AND u = {{user_id:String}}"
        params = {**params, "user_type": user.identifier_type, "user_id": user.identifier}
    rows = await warehouse.query(sql, params)
    return [Ranked(int(r["rank"]), User(r["u"], r["t"]), Decimal(r["total_text"]), int(r["n"])) for r in rows], count
