"""The rows of an export (API.md §11): every payout or conversion of a project in a window of event time, read a page
at a time by the tables' sorting keys (keyset paging: each page starts where the last ended, so memory is one page's
whatever the window, and a page costs the same at the start or the end of the export).

Pages, not one streamed query: the embedded engine (chdb) runs one query at a time on its connection, and a streamed
result is cancelled by the next query any request or worker makes, where a page's query is over in a moment.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from decimal import Decimal

from rewards.domain.amounts import format_amount
from rewards.domain.claim_checks import OPEN, check_id
from rewards.domain.reversals import REVERSAL_PART
from rewards.domain.timestamps import format_timestamp
from rewards.ports import Warehouse
from schemas.clickhouse.values import DT, ch_datetime, time_window

# A page's rows: the serving process's RSS grows by about this many rows' worth, whatever the window (1M payouts as CSV
# at 2026-11-29: +69 MB embedded, where chdb's own memory is the process's too, +17 MB query-api; 10,000 a page went
# 1.6-1.8x faster but +168 MB embedded: docs/benchmarks.md, "Exports").
PAGE_ROWS = 2_000
CHECKS_PER_QUERY = 2_000  # claim check ids sent at once, as a query parameter
POINT, PAID, REJECTED = "point", "paid", "rejected"
REJECTED_PART = ":rejected"  # a rejected payout's id: its payout's, marked (as in the payout movements)


@dataclass(frozen=True)
class Window:
    """Event times from `start_ms` inclusive to `end_ms` exclusive; None: open."""

    start_ms: int | None = None
    end_ms: int | None = None


PAYOUT_COLUMNS = (
    "id", "dedup_id", "kind", "level", "user_identifier", "user_identifier_type", "amount", "currency",
    "currency_chain_id", "currency_name", "currency_decimals", "status", "status_details", "reversal", "event_time",
    "processed_at",
)  # fmt: skip
CONVERSION_COLUMNS = (
    "dedup_id", "name", "user_identifier", "user_identifier_type", "event_time", "received_at", "batch_id", "args",
    "metadata",
)  # fmt: skip


def _window_sql(column: str, window: Window, params: dict) -> str:
    return "".join(f" AND {condition}" for condition in time_window(column, window.start_ms, window.end_ms, params))


# Paid payouts (reversing rows included: negative, `reversal` their reversal's id) and rejected ones (API.md §8), by
# (event time, payout id, paid before rejected): a cap splits one payout into a paid part and a rejected rest. Each
# table is read in its sorting key's order from the last page's row on, a page and one row at most (the last row
# itself may be among them), so a page costs the same at the end of a long export as at its start.
_PAYOUTS_SQL = """
SELECT * FROM (
    (SELECT payout_id, source_id, kind, level, recipient_identifier, recipient_identifier_type,
            toString(amount) AS amount_text, currency, currency_chain_id, currency_name, currency_decimals,
            '' AS rejection, reversal, toUnixTimestamp64Milli(happened_at) AS event_ms,
            toUnixTimestamp64Milli(created_at) AS processed_ms, toUInt8(0) AS part
     FROM payouts WHERE project_id = {project:String}{window}{from_key}
     ORDER BY happened_at, payout_id LIMIT {branch_limit:UInt32})
    UNION ALL
    (SELECT payout_id, source_id, kind, level, recipient_identifier, recipient_identifier_type,
            toString(amount) AS amount_text, currency, currency_chain_id, currency_name, currency_decimals,
            toString(reason) AS rejection, '' AS reversal, toUnixTimestamp64Milli(happened_at) AS event_ms,
            toUnixTimestamp64Milli(created_at) AS processed_ms, toUInt8(1) AS part
     FROM rejected_payouts WHERE project_id = {project:String}{window}{from_key}
     ORDER BY happened_at, payout_id LIMIT {branch_limit:UInt32})
){after}
ORDER BY event_ms, payout_id, part
LIMIT {limit:UInt32}
"""
_CONVERSIONS_SQL = """
SELECT dedup_id, name, user_identifier, user_identifier_type, toUnixTimestamp64Milli(timestamp) AS event_ms,
       toUnixTimestamp64Milli(received_at) AS received_ms, batch_id, args, metadata
FROM conversions WHERE project_id = {project:String}{window}{after}
ORDER BY timestamp, dedup_id
LIMIT {limit:UInt32}
"""


async def payout_pages(warehouse: Warehouse, project_id: str, window: Window) -> AsyncIterator[list[dict]]:
    """The window's payout rows (PAYOUT_COLUMNS), a page at a time, in event time order."""
    params: dict = {"project": project_id, "limit": PAGE_ROWS, "branch_limit": PAGE_ROWS + 1}
    window_sql = _window_sql("happened_at", window, params)
    last: dict | None = None
    while True:
        keyset = {"from_key": "", "after": ""}
        if last is not None:  # each table from the last row's time on, then exactly after the last row
            params.update(after_t=ch_datetime(int(last["event_ms"])), after_ms=int(last["event_ms"]),
                          after_id=last["payout_id"], after_part=int(last["part"]))  # fmt: skip
            # (the first condition alone is what the primary key's index surely prunes by)
            keyset = {"from_key": f" AND happened_at >= {{after_t:{DT}}}"
                                  f" AND (happened_at, payout_id) >= ({{after_t:{DT}}}, {{after_id:String}})",
                      "after": " WHERE (event_ms, payout_id, part) > ({after_ms:Int64}, {after_id:String},"
                               " {after_part:UInt8})"}  # fmt: skip
        sql = _PAYOUTS_SQL.replace("{window}", window_sql)
        for name, text in keyset.items():
            sql = sql.replace(f"{{{name}}}", text)
        rows = await warehouse.query(sql, params)
        if not rows:
            return
        statuses = await _check_statuses(warehouse, project_id, rows)
        yield [_payout_row(row, statuses, project_id) for row in rows]
        if len(rows) < PAGE_ROWS:
            return
        last = rows[-1]


def _payout_row(row: dict, statuses: dict[str, str], project_id: str) -> dict:
    if row["rejection"]:
        status = REJECTED
    elif row["currency"] == POINT:
        status = PAID
    else:  # a token's payout (or its reversal) has its claim check's status
        status = statuses.get(_check_of(project_id, row["payout_id"]), OPEN)
    return {
        "id": row["payout_id"] + (REJECTED_PART if row["rejection"] else ""),
        "dedup_id": row["source_id"],
        "kind": row["kind"],
        "level": int(row["level"]),
        "user_identifier": row["recipient_identifier"],
        "user_identifier_type": row["recipient_identifier_type"],
        "amount": Decimal(row["amount_text"]),
        "currency": row["currency"],
        "currency_chain_id": int(row["currency_chain_id"]),
        "currency_name": row["currency_name"],
        "currency_decimals": int(row["currency_decimals"]),
        "status": status,
        "status_details": row["rejection"],
        "reversal": row["reversal"],
        "event_time": int(row["event_ms"]),
        "processed_at": int(row["processed_ms"]),
    }


def _check_of(project_id: str, payout_id: str) -> str:
    return check_id(project_id, payout_id.partition(REVERSAL_PART)[0])


async def _check_statuses(warehouse: Warehouse, project_id: str, rows: list[dict]) -> dict[str, str]:
    """The current status of the claim checks the page's token payouts opened (one not written yet: open)."""
    ids = sorted({_check_of(project_id, r["payout_id"]) for r in rows if r["currency"] != POINT and not r["rejection"]})
    statuses: dict[str, str] = {}
    for start in range(0, len(ids), CHECKS_PER_QUERY):
        found = await warehouse.query(
            "SELECT id, status FROM claim_checks FINAL"
            " WHERE project_id = {project:String} AND id IN {ids:Array(String)}",
            {"project": project_id, "ids": ids[start : start + CHECKS_PER_QUERY]},
        )
        statuses.update((row["id"], row["status"]) for row in found)
    return statuses


async def conversion_pages(warehouse: Warehouse, project_id: str, window: Window) -> AsyncIterator[list[dict]]:
    """The window's conversions (CONVERSION_COLUMNS), a page at a time, in event time order."""
    params: dict = {"project": project_id, "limit": PAGE_ROWS}
    sql = _CONVERSIONS_SQL.replace("{window}", _window_sql("timestamp", window, params))
    after = ""
    while True:
        rows = await warehouse.query(sql.replace("{after}", after), params)
        if not rows:
            return
        yield [_conversion_row(row) for row in rows]
        if len(rows) < PAGE_ROWS:
            return
        params.update(after_t=ch_datetime(int(rows[-1]["event_ms"])), after_id=rows[-1]["dedup_id"])
        after = (f" AND timestamp >= {{after_t:{DT}}}"
                 f" AND (timestamp, dedup_id) > ({{after_t:{DT}}}, {{after_id:String}})")  # fmt: skip


def _conversion_row(row: dict) -> dict:
    return {
        "dedup_id": row["dedup_id"],
        "name": row["name"],
        "user_identifier": row["user_identifier"],
        "user_identifier_type": row["user_identifier_type"],
        "event_time": int(row["event_ms"]),
        "received_at": int(row["received_ms"]),
        "batch_id": row["batch_id"],
        "args": row["args"],  # JSON texts, as received
        "metadata": row["metadata"],
    }


async def count(warehouse: Warehouse, project_id: str, window: Window, what: str) -> int:
    """How many rows the export of `what` (payouts or conversions) holds now: a progress bar's total."""
    params: dict = {"project": project_id}
    if what == "conversions":
        sql = "SELECT count() AS n FROM conversions WHERE project_id = {project:String}"
        rows = await warehouse.query(sql + _window_sql("timestamp", window, params), params)
        return int(rows[0]["n"])
    total = 0
    for table in ("payouts", "rejected_payouts"):
        sql = f"SELECT count() AS n FROM {table} WHERE project_id = {{project:String}}"
        total += int((await warehouse.query(sql + _window_sql("happened_at", window, params), params))[0]["n"])
    return total


def text_fields(row: dict) -> dict:
    """A row as text formats write it: exact amounts without exponent or trailing zeros, times in ISO 8601."""
    shown = dict(row)
    for name in ("event_time", "processed_at", "received_at"):
        if name in shown:
            shown[name] = format_timestamp(shown[name])
    if "amount" in shown:
        shown["amount"] = format_amount(shown["amount"])
    return shown
