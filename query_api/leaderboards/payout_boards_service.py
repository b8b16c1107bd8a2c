"""The leaderboards of API.md §1 (GET /payouts/leaderboard/payouts and /users): users ranked by the points (or an
on-chain currency's raw units) earned in one role, over all time or a window exact to the millisecond."""

from dataclasses import dataclass
from decimal import Decimal

from query_api.leaderboards.service import rank
from rewards.domain.limits import MAX_MS, MIN_MS, clamp_time_ms
from rewards.domain.payouts import User
from rewards.ports import Warehouse
from schemas.clickhouse.values import ch_datetime

HOUR_MS = 3_600_000
DT = "DateTime64(3, 'UTC')"


@dataclass(frozen=True)
class Ranked:
    rank: int
    user: User
    total: Decimal
    attributions: int
    chain_id: int | None = None  # the chain of the on-chain currency ranked; None for points


@dataclass(frozen=True)
class _Totals:
    """Where one currency's per-user totals are: all time, per hour, and the raw payouts' rows of it."""

    all_time: str
    hourly: str
    own_rows: str  # the condition on the two tables above
    raw_rows: str  # the condition on `payouts`
    chain: str  # the currency's chain id


POINT_TOTALS = _Totals("point_totals_by_user", "point_totals_by_user_hour", "1", "currency = 'point'", "toInt64(0)")
# Payouts in an on-chain currency, by its address in lowercase (schemas/clickhouse/008).
TOKEN_TOTALS = _Totals(
    "token_totals_by_user",
    "token_totals_by_user_hour",
    "currency = {currency:String}",
    "lower(currency) = {currency:String}",
    "max(currency_chain_id)",
)


def _totals_sql(window: tuple[int | None, int | None], source: _Totals = POINT_TOTALS) -> tuple[str, dict]:
    """Per-user totals of one role: all time from the totals table, or within [from, to] from the hourly table plus
    raw payouts for the partial hours at the edges (exact to the millisecond)."""
    start, end = window
    if start is None and end is None:
        return (
            "SELECT recipient_identifier_type AS t, recipient_identifier AS u, sum(amount) AS total, "
            f"sum(payouts) AS n, {source.chain} AS chain FROM {source.all_time} WHERE project_id = {{project:String}} "
            f"AND role = {{role:String}} AND {source.own_rows} GROUP BY t, u",
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
        "SELECT t, u, sum(total) AS total, sum(n) AS n, max(chain) AS chain FROM ("
        " SELECT recipient_identifier_type AS t, recipient_identifier AS u, sum(amount) AS total, sum(payouts) AS n,"
        f" {source.chain} AS chain FROM {source.hourly} WHERE project_id = {{project:String}}"
        f" AND role = {{role:String}} AND {source.own_rows}"
        f" AND hour >= {{whole_from:{DT}}} AND hour < {{whole_to:{DT}}} GROUP BY t, u"
        " UNION ALL"
        " SELECT recipient_identifier_type AS t, recipient_identifier AS u, sum(amount) AS total,"
        " countIf(reversal = '') AS n,"
        f" {source.chain} AS chain FROM payouts WHERE project_id = {{project:String}} AND role = {{role:String}}"
        f" AND {source.raw_rows}"
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
    currency: str | None = None,
) -> tuple[list[Ranked], int]:
    """Ranked rows (ties share a rank: 1, 2, 2, 4) and the number of ranked users: by points, or by the payouts in the
    on-chain currency whose address (lowercase) is `currency`, in raw units."""
    totals, params = _totals_sql(window, POINT_TOTALS if currency is None else TOKEN_TOTALS)
    params = {**params, "project": project_id, "role": role}
    if currency is not None:
        params["currency"] = currency
    rows, count = await rank(warehouse, totals, params, (offset, limit), user, ["n", "chain"])
    return [
        Ranked(
            row.rank,
            row.user,
            row.total,
            int(row.columns["n"]),
            None if currency is None else int(row.columns["chain"]),
        )
        for row in rows
    ], count
