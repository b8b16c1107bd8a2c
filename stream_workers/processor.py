"""Turn deliveries of the event log into rows of the warehouse: decode → plan → compute → allot → write → mark.

A delivery is written with one insert per table under the delivery's token, so a delivery seen
again after a crash (written, not yet committed) writes nothing twice. Only then does the state
store learn of it (events marked processed), idempotently too; new claim checks are registered just before the write
(stream_workers.allot: a check readable once written is one the state store can close).

Each record type has its handler (stream_workers/handlers/): what it needs of its project's state, its rows, the key
that tells it was written (stream_workers/written.py drops records written already) and what it leaves when set aside.

One bad record never holds up the others: each record's rows are computed on their own, and a record
that cannot be read or computed (computing is pure, so such a failure would repeat forever) becomes a
row of `dead_letters`, with the reason, instead of its rows. Failures of the engines (reading the state
store, inserting) fail the whole delivery, which is retried.
"""

import asyncio

import structlog
from prometheus_client import Counter

from rewards.domain.timestamps import now_ms
from rewards.ports import DeadLetterLog, Delivery, StateStore, Warehouse
from rewards.stages import CONSUMED, MARKED, WRITTEN, oldest_received_ms, reached
from schemas.clickhouse.views import insert_waves
from schemas.records import ReversalRecord
from stream_workers.allot import allot, forget
from stream_workers.handlers import Handler, handler_of
from stream_workers.handlers.base import Project, Unusable, usable
from stream_workers.projects import projects_of
from stream_workers.writes import Writes
from stream_workers.written import not_yet_written

log = structlog.get_logger(__name__)
DEAD_LETTERS = Counter("rewards_worker_dead_letters_total", "Records set aside as dead letters", ["record_type"])

TABLES = (
    "conversions", "payouts", "rejected_payouts", "affiliate_volumes", "referrals", "referral_codes", "affiliates",
    "claim_checks", "tracking_events", "referral_removals", "conversion_reversals", "reversals", "debts",
    "pending_payouts", "payout_decisions", "dead_letters", "dedup_ids",
)  # fmt: skip
# dedup_ids last: an id found there means every row of its record was written. Before it, the tables in waves, each
# wave's inserts at once: a table whose views join another table's rows of the delivery comes after that table
# (`payouts` and `rejected_payouts` read the delivery's `conversions`; `affiliate_volumes` its `payouts` too).
LAST = "dedup_ids"
WAVES = (*insert_waves(t for t in TABLES if t != LAST), (LAST,))
DEFAULT_WINDOW_S = 35 * 86400.0


async def process_delivery(
    delivery: Delivery,
    state: StateStore,
    warehouse: Warehouse,
    dead_letters: DeadLetterLog | None = None,
    window_s: float = DEFAULT_WINDOW_S,
) -> int:
    """Write one delivery (its records decoded: stream_workers.batches); returns the number of payouts written. Dead
    letters are also published on `dead_letters` when given (the production shape's `rewards.events.dlq` topic).
    `window_s`: the dedup window."""
    paid = 0
    received_ms = oldest_received_ms(delivery.records)  # the stages each part reaches (rewards.stages)
    reached(CONSUMED, received_ms)
    for records, token in _parts(delivery):
        records, projects = await plan(records, state, warehouse, window_s)
        writes = compute(records, projects, now_ms(), token)
        await allot(writes, projects, state, warehouse, token)
        await write(writes, token, warehouse)
        reached(WRITTEN, received_ms)
        if dead_letters is not None and writes.rows["dead_letters"]:
            # Before the marks: a delivery retried after a failed publish would find its ids done and drop them.
            await dead_letters.publish(writes.rows["dead_letters"])
        await mark(writes, state)
        reached(MARKED, received_ms)
        _count_dead_letters(writes.rows["dead_letters"], token)
        paid += writes.payouts
    return paid


def _parts(delivery: Delivery) -> list[tuple[list, str]]:
    """The delivery's records in the parts written one after the other, each under a token of its own: its
    reversals after the rest, so that they read their events' rows from the warehouse even when an event and its
    reversal share the delivery (stream_workers/handlers/reversal.py)."""
    reversals = [record for record in delivery.records if isinstance(record, ReversalRecord)]
    if not reversals:
        return [(delivery.records, delivery.token)]
    others = [record for record in delivery.records if not isinstance(record, ReversalRecord)]
    return [(others, delivery.token), (reversals, f"{delivery.token}:reversals")]


# The steps of a delivery, apart so that bench/workers.py can time each.


async def plan(
    records: list, state: StateStore, warehouse: Warehouse, window_s: float = DEFAULT_WINDOW_S
) -> tuple[list, dict[str, Project | Unusable]]:
    """The records still to write, and what they need of their projects' state (a few round trips per project)."""
    records = await not_yet_written(records, state, warehouse, window_s)
    return records, await projects_of(records, state, warehouse)


def compute(records: list, projects: dict[str, Project | Unusable], created: int, token: str) -> Writes:
    """Every row of the records (pure: reads nothing but its arguments)."""
    writes = Writes()
    for record in records:
        _add_alone(handler_of(record), record, projects, writes, created, token)
    return writes


async def write(writes: Writes, token: str, warehouse: Warehouse) -> None:
    """One insert per table, under the delivery's token, wave after wave (WAVES)."""

    async def insert(table: str) -> None:
        await warehouse.insert(table, writes.rows[table], f"{token}:{table}")

    for wave in WAVES:
        # Every insert ends before a failure is raised: none is still running when the delivery is tried again.
        results = await asyncio.gather(*map(insert, wave), return_exceptions=True)
        if failed := next((result for result in results if isinstance(result, BaseException)), None):
            raise failed


async def mark(writes: Writes, state: StateStore) -> None:
    """What the state store learns once the rows are written (idempotent)."""
    for project_id, dedup_ids in writes.processed.items():
        await state.mark_processed(project_id, dedup_ids)
    for project_id, dedup_ids in writes.failed.items():
        await state.mark_failed(project_id, dedup_ids)
    for project_id, shares in writes.reversed.items():
        await state.mark_reversed(project_id, shares)
    await forget(writes, state)  # last: a delivery seen again before its marks must find its grants


def _add_alone(handler: Handler, record, projects: dict, writes: Writes, created: int, token: str) -> None:
    """Add the record's rows, or, if it cannot be read or computed, a dead letter in their place."""
    project = projects.get(record.project_id)
    if (reason := handler.refusal(record, project)) is None:
        project = usable(project)
        try:
            handler.add(record, project, writes, created)
            return
        except Exception as exc:  # deterministic: computing a record's rows reads nothing but the record
            reason = f"{type(exc).__name__}: {exc}"
    writes.rows["dead_letters"].append(handler.dead_letter(record, reason, token, created))
    handler.set_aside(record, writes)


def _count_dead_letters(dead: list[dict], token: str) -> None:
    """Counted and logged once written (a delivery retried after a failed insert counts them once)."""
    for row in dead:
        DEAD_LETTERS.labels(row["record_type"]).inc()
        log.error(
            "record set aside as a dead letter",
            project_id=row["project_id"],
            record_type=row["record_type"],
            source_id=row["source_id"],
            reason=row["reason"],
            delivery=token,
        )
