"""The state copy's money half (runtime.moving.state): caps and budgets (allot_released, allot_counters,
allot_history; not allot_deliveries: runtime.moving.state.NOT_COPIED), reversals and debts (reversals, debts,
debt_calls), held payouts, and webhooks (webhook_endpoints, webhook_deliveries with webhook_queued, webhook_failing)
written as the Redis store writes them (rewards.adapters.production.redis_keys), its encodings taken from its own
modules.

Each key's time to live is the Redis store's, from the row's own time; a row past it is not copied. The global index
of webhook endpoints (`rw:{webhooks}:…`, a slot of its own) is derived from the deliveries, as the store's
webhook_index would have left it; webhook_queued, SQLite's own index of the same, is not read.
"""

import json
from decimal import Decimal

from rewards.adapters.production import redis_keys
from rewards.adapters.production.redis_keys import ProjectKeys, parse_user_field
from rewards.adapters.production.redis_state.allotment import _field
from rewards.adapters.production.redis_state.approvals import DECIDED
from rewards.adapters.production.redis_state.base import _json, _ms
from rewards.adapters.production.redis_state.webhook_queue import _document, _log_member, _state
from rewards.domain import webhook_events, webhooks
from rewards.domain.allotment import KEPT_MS, RELEASES_KEPT_MS, month_end_of
from rewards.domain.amounts import format_amount
from rewards.domain.payouts import User
from runtime.moving.state import Moving, TableCopy, copy_rows, resealed, rows

VERSION = 1  # the wh_version of a project whose deliveries were copied, and of its endpoints' states in the index


# -- caps and budgets -----------------------------------------------------------------------------------------------


async def copy_allot_released(moving: Moving) -> int:
    def write(pipe, row) -> None:
        pipe.zadd(ProjectKeys(row["project_id"]).allotment("released"), {row["check_id"]: row["created_ms"]})

    sql = "SELECT project_id, check_id, created_ms FROM allot_released WHERE created_ms > ?"
    return await copy_rows(moving, sql, write, (moving.now_ms - RELEASES_KEPT_MS,))


def counter_field(who: str) -> str:
    """SQLite's `<side>|<n>:<currency>|<user>` (n: the currency's length in characters) as Redis's field (n in
    bytes: the allot script's `#cur`)."""
    side, rest = who.split("|", 1)
    length, rest = rest.split(":", 1)
    currency, user = rest[: int(length)], rest[int(length) + 1 :]
    return _field(side, currency, parse_user_field(user))


def counter(key: str) -> tuple[str, str, int | None]:
    """A counter's key of allot_counters as (Redis key's name under `al:`, its field, when it expires)."""
    kind, rest = key.split("|", 1)
    if kind == "paid":
        return "paid", rest, None
    if kind == "total":
        return "total", counter_field(rest), None
    month, who = rest.split("|", 1)
    return f"month:{month}", counter_field(who), month_end_of(month) + KEPT_MS


async def copy_allot_counters(moving: Moving) -> int:
    def write(pipe, row) -> None:
        name, field, expires_ms = counter(row["key"])
        key = ProjectKeys(row["project_id"]).allotment(name)
        pipe.hset(key, field, row["units"])
        if expires_ms is not None:
            pipe.pexpireat(key, expires_ms)

    sql = "SELECT project_id, key, units FROM allot_counters WHERE expires_ms IS NULL OR expires_ms > ?"
    return await copy_rows(moving, sql, write, (moving.now_ms,))


def history_member(row) -> tuple[str, int]:
    """A row's member of its rolling cap's zset, as the allot script writes one call's grants ("<delivery>#<id>#<ms>|
    <event ms>:<units>,…": the row's id stands for the call's, its latest grant's time for its; nothing of the move's
    own, so that a move run again writes the same member, not a second one), and its score: the latest."""
    grants = json.loads(row["grants"])
    tail, latest = ",".join(f"{at}:{units}" for at, units in grants), max(at for at, _ in grants)
    return f"moved#{row['rowid']}#{latest}|{tail}", latest


async def copy_allot_history(moving: Moving) -> int:
    def write(pipe, row) -> None:
        key = ProjectKeys(row["project_id"]).allotment("hist:" + counter_field(row["key"]))
        member, latest = history_member(row)
        pipe.zadd(key, {member: latest})
        pipe.pexpireat(key, row["expires_ms"])  # latest + the currency's keeping: the rows' last is the key's greatest

    sql = "SELECT rowid, project_id, key, grants, expires_ms FROM allot_history WHERE expires_ms > ?"
    return await copy_rows(moving, sql + " ORDER BY project_id, key, expires_ms", write, (moving.now_ms,))


# -- reversals, debts, held payouts ---------------------------------------------------------------------------------


async def copy_reversals(moving: Moving) -> int:
    window_ms = _ms(moving.settings.dedup_window)

    def write(pipe, row) -> None:
        k, expires_ms = ProjectKeys(row["project_id"]), row["updated_ms"] + window_ms
        # No "e": the last reversal's outbox entry was published (a drained data dir); reverse.lua builds on none.
        state = {"s": format_amount(Decimal(row["reversed"])), "d": json.loads(row["digests"])}
        pipe.set(k.reversal(row["dedup_id"]), _json(state), pxat=expires_ms)
        if row["written"] is not None:  # (kept with its row, as SQLite keeps it: its mark's own time is not known)
            pipe.set(k.reversal_written(row["dedup_id"]), row["written"], pxat=expires_ms)

    sql = "SELECT project_id, dedup_id, reversed, digests, updated_ms, written FROM reversals WHERE updated_ms > ?"
    return await copy_rows(moving, sql, write, (moving.now_ms - window_ms,))


async def copy_debts(moving: Moving) -> int:
    def write(pipe, row) -> None:
        user = User(row["user_id"], row["user_type"])
        pipe.set(ProjectKeys(row["project_id"]).debt(row["currency"], user), row["units"])

    return await copy_rows(moving, "SELECT project_id, user_type, user_id, currency, units FROM debts", write)


async def copy_debt_calls(moving: Moving) -> int:
    def write(pipe, row) -> None:
        k = ProjectKeys(row["project_id"])
        pipe.hset(k.debt_calls(), row["token"], row["answer"])
        pipe.zadd(k.debt_calls_at(), {row["token"]: row["created_ms"]})

    sql = "SELECT project_id, token, answer, created_ms FROM debt_calls WHERE created_ms > ?"
    return await copy_rows(moving, sql, write, (moving.now_ms - KEPT_MS,))


async def copy_held_payouts(moving: Moving) -> int:
    def write(pipe, row) -> None:
        key = ProjectKeys(row["project_id"]).held_payout(row["payout_id"])
        if row["decided_ms"] is None:
            pipe.set(key, _json(json.loads(row["row"])))
        else:
            pipe.set(key, DECIDED, pxat=row["decided_ms"] + KEPT_MS)

    sql = "SELECT project_id, payout_id, row, decided_ms FROM held_payouts WHERE decided_ms IS NULL OR decided_ms > ?"
    return await copy_rows(moving, sql, write, (moving.now_ms - KEPT_MS,))


# -- webhooks -------------------------------------------------------------------------------------------------------


async def copy_webhook_endpoints(moving: Moving) -> int:
    def write(pipe, row) -> None:
        endpoint = webhooks.from_json(json.loads(row["document"]))
        endpoint = endpoint.with_changes(sealed_secret=resealed(moving, endpoint.sealed_secret))
        pipe.hset(ProjectKeys(row["project_id"]).webhooks(), row["id"], _json(webhooks.to_json(endpoint)))

    return await copy_rows(moving, "SELECT project_id, id, document FROM webhook_endpoints", write)


# Deliveries held: pending ones, and finished ones not yet past RETAIN_MS (the sweep's cutoff, kept at it).
_HELD = "FROM webhook_deliveries WHERE status = 'pending' OR created_ms >= ?"


async def copy_webhook_deliveries(moving: Moving) -> int:
    def write(pipe, row) -> None:
        k, endpoint_id = ProjectKeys(row["project_id"]), row["endpoint_id"]
        delivery = webhook_events.delivery_from_json(json.loads(row["document"]))
        member = _log_member(delivery)
        pipe.hset(k.webhook_deliveries(), row["id"], _document(delivery))
        pipe.zadd(k.webhook_log(endpoint_id), {member: 0})
        if row["status"] == webhook_events.PENDING_DELIVERY:  # (the column, not the document: what a lease changes)
            pipe.zadd(k.webhook_due(endpoint_id), {row["id"]: row["next_attempt_ms"]})
        else:
            pipe.zadd(k.webhook_done(endpoint_id), {member: row["created_ms"]})

    cutoff = moving.now_ms - webhook_events.RETAIN_MS
    columns = "project_id, id, endpoint_id, created_ms, status, next_attempt_ms, document"
    copied = await copy_rows(moving, f"SELECT {columns} {_HELD}", write, (cutoff,))
    await index_webhook_endpoints(moving, cutoff)
    return copied


async def index_webhook_endpoints(moving: Moving, cutoff: int) -> None:
    """Each endpoint's state, as webhook_index applies one: its project's wh_version, and in the global index (a
    pipeline of its slot) the endpoint holding deliveries, with its earliest due if any is pending."""
    sql = (
        "SELECT project_id, endpoint_id, min(CASE WHEN status = 'pending' THEN next_attempt_ms END) AS due, "
        f"sum(status = 'pending') AS pending, count(*) AS held {_HELD} GROUP BY project_id, endpoint_id"
    )
    for chunk in rows(moving.source, sql, (cutoff,)):
        projects, index = moving.redis.pipeline(transaction=False), moving.redis.pipeline(transaction=False)
        for row in chunk:
            projects.set(ProjectKeys(row["project_id"]).webhook_version(), VERSION)
            member = _state(row["project_id"], row["endpoint_id"], VERSION, [])[0]
            index.hset(redis_keys.webhook_endpoints(), member, f"{VERSION}:{row['pending']}")
            if row["due"] is not None:
                index.zadd(redis_keys.webhook_ready(), {member: row["due"]})
        await projects.execute()
        await index.execute()


async def copy_webhook_failing(moving: Moving) -> int:
    def write(pipe, row) -> None:
        pipe.hset(ProjectKeys(row["project_id"]).webhook_failing(), row["endpoint_id"], row["since_ms"])

    return await copy_rows(moving, "SELECT project_id, endpoint_id, since_ms FROM webhook_failing", write)


COPIES: list[TableCopy] = [
    TableCopy(("webhook_endpoints",), copy_webhook_endpoints),
    TableCopy(("allot_released",), copy_allot_released),
    TableCopy(("allot_counters",), copy_allot_counters),
    TableCopy(("allot_history",), copy_allot_history),
    TableCopy(("reversals",), copy_reversals),
    TableCopy(("debts",), copy_debts),
    TableCopy(("debt_calls",), copy_debt_calls),
    TableCopy(("held_payouts",), copy_held_payouts),
    TableCopy(("webhook_deliveries", "webhook_queued"), copy_webhook_deliveries),
    TableCopy(("webhook_failing",), copy_webhook_failing),
]
