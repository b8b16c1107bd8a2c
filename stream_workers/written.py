"""What a delivery need not write again: records written already, by this delivery before a crash or by an earlier one.

The warehouse refuses a second payout on its own, whatever the state store forgot (Redis keeps ids for a short
hot window only, and may lose its last second in a crash): each delivery's last insert is its `dedup_ids` rows
(rewards.adapters.dedup_archive), and the ids of a delivery that the state store has not marked done are looked up
there first; those found were written whole by an earlier delivery and are dropped.
"""

from collections import defaultdict
from decimal import Decimal

from rewards.adapters import dedup_archive
from rewards.ports import IngestStore, ReversalStore, Warehouse
from schemas.records import ReversalRecord
from stream_workers.handlers import handler_of


class _Marks(IngestStore, ReversalStore):
    """What marks a record written."""


async def not_yet_written(records: list, state: _Marks, warehouse: Warehouse, window_s: float) -> list:
    """Drop records already written (published twice: an ingest retry after Redis forgot the id, the outbox
    relaying a change again) and repeats within the delivery. Ids the state store had not marked done but the
    warehouse holds are marked now."""
    keys: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for record in records:
        if (key := handler_of(record).key(record)) is not None:
            keys[record.project_id].add(key)
    done: set[tuple[str, tuple[str, str]]] = set()
    unsure: dict[str, set[tuple[str, str]]] = {}
    for project_id, project_keys in keys.items():
        events = [d for kind, d in project_keys if kind == dedup_archive.EVENT]
        marked = await state.processed_among(project_id, events) if events else set()
        done |= {(project_id, (dedup_archive.EVENT, d)) for d in marked}
        unsure[project_id] = project_keys - {(dedup_archive.EVENT, d) for d in marked}
    # Every project's at once: one warehouse query (per chunk of ids) for the delivery.
    for project_id, written in (await dedup_archive.written_among_projects(warehouse, unsure, window_s)).items():
        done |= {(project_id, key) for key in written}
        await _mark_found(state, project_id, written)
        await _mark_reversals_found(state, project_id, written, records)
    kept = []
    for record in records:
        if (key := handler_of(record).key(record)) is not None:
            if (record.project_id, key) in done:
                continue
            done.add((record.project_id, key))
        kept.append(record)
    return kept


async def _mark_found(state: IngestStore, project_id: str, written: dict[tuple[str, str], str]) -> None:
    """Events the warehouse holds that the state store had not marked done (its marks were lost): mark them."""
    for status, mark in (("processed", state.mark_processed), ("failed", state.mark_failed)):
        ids = [d for (kind, d), found in written.items() if kind == dedup_archive.EVENT and found == status]
        if ids:
            await mark(project_id, ids)


async def _mark_reversals_found(
    state: ReversalStore, project_id: str, written: dict[tuple[str, str], str], records: list
) -> None:
    """Reversals the warehouse holds: their events' shares marked written (again: a share never goes down)."""
    shares: dict[str, Decimal] = {}
    for record in records:
        found = isinstance(record, ReversalRecord) and (dedup_archive.REVERSAL, record.id) in written
        if found and record.project_id == project_id:
            shares[record.dedup_id] = max(shares.get(record.dedup_id, Decimal(0)), Decimal(record.reversed_after))
    if shares:
        await state.mark_reversed(project_id, shares)
