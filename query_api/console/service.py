"""The operator console's own reads (GET /api/v1/console/...): what no endpoint of the contract answers for a project
as a whole. Each filters on the project first (the views' sorting keys begin with it), and each is bounded: the
pipeline's last day by minute, the points of at most 30 days by hour, the newest claims.

Pipeline health is per project, and so are its sources: `pipeline_minutes` (schemas/clickhouse/010), the views'
counts of the rows the workers write, and `dead_letters` (003). The service's Prometheus metrics stay process-wide:
a label per project there would make series without bound. The one figure no view holds per project is the event
log's backlog (Kafka's consumer lag, the embedded outbox's rows): it is the whole pipeline's, read where this process
measures it (`rewards serve`), which delays every project alike."""

from dataclasses import dataclass
from decimal import Decimal

from rewards.domain.amounts import format_amount
from rewards.domain.timestamps import format_timestamp
from rewards.ports import ProjectStore, Warehouse
from rewards.web.backpressure import Backpressure
from schemas.clickhouse.values import ch_datetime

DT = "DateTime64(3, 'UTC')"
MINUTE_MS = 60_000
HOUR_MS = 3_600_000
DAY_MS = 86_400_000
RATE_MINUTES = 5  # rates and freshness: the events of the current minute and of the 4 before
SERIES_MINUTES = 60  # the chart of events per minute


@dataclass(frozen=True)
class Minute:
    start_ms: int
    accepted: int
    processed: int
    delay_ms: int
    max_delay_ms: int
    dead_letters: int


async def project_name(state: ProjectStore, project_id: str) -> str | None:
    """The name the project was created with (`rewards project create --name`), shown beside its id."""
    project = await state.get_project(project_id)
    return None if project is None else project.name


async def pipeline_minutes(warehouse: Warehouse, project_id: str, since_ms: int) -> list[Minute]:
    """The project's minutes from `since_ms` on, oldest first (minutes without any event are left out)."""
    rows = await warehouse.query(
        "SELECT toUnixTimestamp(minute) AS second, sum(accepted) AS accepted, sum(processed) AS processed,"
        " sum(delay_ms) AS delay_ms, max(max_delay_ms) AS max_delay_ms, sum(dead_letters) AS dead_letters"
        f" FROM pipeline_minutes WHERE project_id = {{project:String}} AND minute >= {{since:{DT}}}"
        " GROUP BY minute ORDER BY minute",
        {"project": project_id, "since": ch_datetime(since_ms)},
    )
    counts = ("accepted", "processed", "delay_ms", "max_delay_ms", "dead_letters")
    return [Minute(int(r["second"]) * 1000, *(int(r[name]) for name in counts)) for r in rows]


async def latest_dead_letters(warehouse: Warehouse, project_id: str, limit: int) -> list[dict]:
    """The newest records set aside, without their payloads (what an operator looks for first: why, and which)."""
    rows = await warehouse.query(
        "SELECT record_type, source_id, reason, toUnixTimestamp64Milli(failed_at) AS failed_ms FROM dead_letters"
        " WHERE project_id = {project:String} ORDER BY failed_at DESC, source_id LIMIT {limit:UInt32}",
        {"project": project_id, "limit": limit},
    )
    return [
        {"record_type": r["record_type"], "source_id": r["source_id"], "reason": r["reason"],
         "failed_at": format_timestamp(int(r["failed_ms"]))}
        for r in rows
    ]  # fmt: skip


def health(minutes: list[Minute], now_ms: int) -> dict:
    """Rates and freshness over the last RATE_MINUTES minutes (the current one up to now), the last SERIES_MINUTES
    minutes one by one, and the dead letters of the last day."""
    this_minute = now_ms // MINUTE_MS * MINUTE_MS
    rate_from = this_minute - (RATE_MINUTES - 1) * MINUTE_MS
    recent = [m for m in minutes if m.start_ms >= rate_from]
    seconds = (now_ms - rate_from) / 1000
    processed = sum(m.processed for m in recent)
    by_start = {m.start_ms: m for m in minutes}
    series_from = this_minute - (SERIES_MINUTES - 1) * MINUTE_MS
    series = [by_start.get(start) for start in range(series_from, this_minute + 1, MINUTE_MS)]
    written = [m.start_ms for m in minutes if m.processed]
    return {
        "window_s": round(seconds, 3),
        "accepted_per_s": round(sum(m.accepted for m in recent) / seconds, 3),
        "processed_per_s": round(processed / seconds, 3),
        "freshness": {
            "average_ms": round(sum(m.delay_ms for m in recent) / processed) if processed else None,
            "max_ms": max((m.max_delay_ms for m in recent), default=None) if processed else None,
            "last_written_minute": format_timestamp(written[-1]) if written else None,
        },
        "dead_letters": {"last_24h": sum(m.dead_letters for m in minutes if m.start_ms > now_ms - DAY_MS)},
        "minutes": [
            {
                "minute": format_timestamp(start),
                "accepted": m.accepted if m else 0,
                "processed": m.processed if m else 0,
            }
            for start, m in zip(range(series_from, this_minute + 1, MINUTE_MS), series, strict=True)
        ],
    }


async def backlog(backpressure: Backpressure | None) -> int | None:
    """The whole pipeline's backlog, in messages, where this process measures it (`rewards serve`); None elsewhere."""
    return None if backpressure is None else await backpressure.backlog()


async def points_by_hour(warehouse: Warehouse, project_id: str, hours: int, now_ms: int) -> list[dict]:
    """Points paid per hour (when their events happened) over the last `hours` hours, the current one included: every
    hour, those without payouts as "0" (the hourly view of schemas/clickhouse/001, which the leaderboards read)."""
    this_hour = now_ms // HOUR_MS * HOUR_MS
    first = this_hour - (hours - 1) * HOUR_MS
    rows = await warehouse.query(
        "SELECT toUnixTimestamp(hour) AS second, toString(sum(amount)) AS points FROM point_totals_by_user_hour"
        f" WHERE project_id = {{project:String}} AND hour >= {{first:{DT}}} AND hour <= {{last:{DT}}}"
        " GROUP BY hour",
        {"project": project_id, "first": ch_datetime(first), "last": ch_datetime(this_hour)},
    )
    points = {int(r["second"]) * 1000: Decimal(r["points"]) for r in rows}
    return [
        {"hour": format_timestamp(hour), "points": format_amount(points.get(hour, Decimal(0)))}
        for hour in range(first, this_hour + 1, HOUR_MS)
    ]


# Claim checks: each check's latest version (FINAL, in a query restricted on the sorting key's project, as
# query_api.claim_checks.service reads them), summed per currency and status over the whole project.
CURRENCY = "currency_address, currency_chain_id"


async def claim_totals(warehouse: Warehouse, project_id: str) -> list[dict]:
    """Per currency: the open, closed, claimed and expired amounts (raw integers, as strings) and the number of
    checks."""
    rows = await warehouse.query(
        f"SELECT {CURRENCY}, any(currency_name) AS currency_name, any(currency_decimals) AS currency_decimals,"
        " toString(sumIf(amount, status = 'open')) AS open, toString(sumIf(amount, status = 'closed')) AS closed,"
        " toString(sumIf(amount, status = 'claimed')) AS claimed,"
        " toString(sumIf(amount, status = 'expired')) AS expired, count() AS checks"
        " FROM (SELECT * FROM claim_checks FINAL WHERE project_id = {project:String})"
        f" GROUP BY {CURRENCY} ORDER BY currency_chain_id, currency_address",
        {"project": project_id},
    )
    return [{**_currency(r), "open": r["open"], "closed": r["closed"], "claimed": r["claimed"],
             "expired": r["expired"], "checks": int(r["checks"])} for r in rows]  # fmt: skip


async def latest_claims(warehouse: Warehouse, project_id: str, limit: int) -> list[dict]:
    """The newest claims: one row per transaction hash, user and currency, as a user's claim history has them."""
    # `status = 'claimed'` beside FINAL: claimed is a check's last status (query_api.claim_checks.service).
    rows = await warehouse.query(
        f"SELECT hash, user_identifier, user_identifier_type, {CURRENCY}, any(currency_name) AS currency_name,"
        " any(currency_decimals) AS currency_decimals, toString(sum(amount)) AS amount, count() AS checks,"
        " toUnixTimestamp64Milli(max(claimed_at)) AS claimed_ms"
        " FROM claim_checks FINAL WHERE project_id = {project:String} AND status = 'claimed'"
        f" GROUP BY hash, user_identifier_type, user_identifier, {CURRENCY}"
        " ORDER BY claimed_ms DESC, hash, currency_address LIMIT {limit:UInt32}",
        {"project": project_id, "limit": limit},
    )
    return [
        {"hash": r["hash"], "user_identifier": r["user_identifier"], "user_identifier_type": r["user_identifier_type"],
         **_currency(r), "amount": r["amount"], "checks": int(r["checks"]),
         "claimed_at": format_timestamp(int(r["claimed_ms"]))}
        for r in rows
    ]  # fmt: skip


def _currency(row: dict) -> dict:
    return {
        "currency_address": row["currency_address"],
        "currency_chain_id": int(row["currency_chain_id"]),
        "currency_name": row["currency_name"],
        "currency_decimals": int(row["currency_decimals"]),
    }


async def rejected_by_reason(warehouse: Warehouse, project_id: str) -> list[dict]:
    """The payouts the rules refused (API.md §8), per reason and currency: how many, and how much."""
    rows = await warehouse.query(
        "SELECT reason, currency, count() AS payouts, toString(sum(amount)) AS amount FROM rejected_payouts"
        " WHERE project_id = {project:String} GROUP BY reason, currency ORDER BY reason, currency",
        {"project": project_id},
    )
    return [{"reason": r["reason"], "currency": r["currency"], "payouts": int(r["payouts"]), "amount": r["amount"]}
            for r in rows]  # fmt: skip


async def reversed_by_currency(warehouse: Warehouse, project_id: str) -> list[dict]:
    """What reversals took back (API.md §9), per currency: how many reversing movements, and how much."""
    rows = await warehouse.query(
        "SELECT currency, count() AS movements, toString(-sum(amount)) AS amount FROM payouts"
        " WHERE project_id = {project:String} AND reversal != '' GROUP BY currency ORDER BY currency",
        {"project": project_id},
    )
    return [{"currency": r["currency"], "movements": int(r["movements"]), "amount": r["amount"]} for r in rows]


async def latest_reversals(warehouse: Warehouse, project_id: str, limit: int) -> list[dict]:
    """The newest reversals: which event, why, and how much of it is reversed since."""
    rows = await warehouse.query(
        "SELECT id, dedup_id, reason, toString(fraction) AS fraction, toString(reversed_after) AS reversed,"
        " toUnixTimestamp64Milli(reversed_at) AS reversed_ms FROM reversals WHERE project_id = {project:String}"
        " ORDER BY reversed_at DESC, id LIMIT {limit:UInt32}",
        {"project": project_id, "limit": limit},
    )
    return [
        {"id": r["id"], "dedup_id": r["dedup_id"], "reason": r["reason"],
         "fraction": format_amount(Decimal(r["fraction"])), "reversed": format_amount(Decimal(r["reversed"])),
         "reversed_at": format_timestamp(int(r["reversed_ms"]))}
        for r in rows
    ]  # fmt: skip


async def latest_rejected(warehouse: Warehouse, project_id: str, limit: int) -> list[dict]:
    """The newest refused payouts: who would have earned what, and why."""
    rows = await warehouse.query(
        "SELECT payout_id, kind, level, recipient_identifier, recipient_identifier_type, toString(amount) AS amount,"
        " currency, reason, toUnixTimestamp64Milli(happened_at) AS happened_ms FROM rejected_payouts"
        " WHERE project_id = {project:String} ORDER BY happened_at DESC, payout_id LIMIT {limit:UInt32}",
        {"project": project_id, "limit": limit},
    )
    return [
        {"id": r["payout_id"] + ":rejected", "kind": r["kind"], "level": int(r["level"]),
         "user_identifier": r["recipient_identifier"], "user_identifier_type": r["recipient_identifier_type"],
         "amount": r["amount"], "currency": r["currency"], "reason": r["reason"],
         "happened_at": format_timestamp(int(r["happened_ms"]))}
        for r in rows
    ]  # fmt: skip
