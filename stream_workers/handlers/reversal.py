"""Reversals (API.md §9): each takes back its share of an event's payouts, volumes and amounts, written as rows of
their own at the event's time (schemas/clickhouse/015_reversals.sql says how the figures read them).

A reversal's record says the event's reversed share before and after it (the state store settled them in order), so
each payout of `amount` gives back exactly ⌊amount × after⌋ − ⌊amount × before⌋ in its currency's smallest unit
(rewards.domain.reversals.taken_back), whichever worker takes it and in whichever order: once an event is reversed
whole, all of every figure is back.

What was paid is read from the warehouse: a reversal is accepted only once its event is (API.md §9: 404 before). Its
event may not be written yet: a project's conversions are spread over the partitions by user, its reversals keep the
project's partition (schemas.topics). A reversal of an event the state store has `accepted` but the warehouse not yet
waits for it (`Waiting`: its delivery is written again shortly, other partitions going on meanwhile). The processor
runs a delivery's reversals after its other records are written (stream_workers.processor), for an event and its
reversal in one delivery. A reversal whose event has no rows (set aside as a dead letter) takes back nothing; one
whose event the state store does not know as accepted (never written) is set aside itself, visibly, rather than
lost."""

from dataclasses import dataclass, field
from decimal import Decimal

from rewards.adapters import dedup_archive
from rewards.domain.allotment import Limits, Tally, currency_key, to_units
from rewards.domain.amounts import format_amount
from rewards.domain.claim_checks import check_id
from rewards.domain.payouts import User
from rewards.domain.reversals import REVERSAL_PART, TakeBack, reversing_payout_id, taken_back
from rewards.ports import StateStore, Warehouse
from schemas.entities import REVERSAL
from schemas.records import ReversalRecord
from stream_workers import rows
from stream_workers.capped import row_key
from stream_workers.handlers.base import Handler, Project, Waiting
from stream_workers.writes import Writes

reversal_row = rows.row_of(REVERSAL, "reversal_row")

_CONVERSIONS = """
SELECT dedup_id, user_identifier_type, user_identifier, timestamp, toUnixTimestamp64Milli(timestamp) AS timestamp_ms,
       name, args,
       toString(counted_volume) AS counted_volume, toString(counted_revenue) AS counted_revenue,
       toString(toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18)) AS volume,
       toString(toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'amount')), 18)) AS revenue
FROM conversions
WHERE project_id = {project:String} AND dedup_id IN {ids:Array(String)}
LIMIT 1 BY dedup_id
"""
# The event's rows as paid (never a reversal's), found by the sorting key (time, id) through its conversion.
_OF_EVENTS = """
WHERE project_id = {project:String} AND reversal = '' AND source_id IN {ids:Array(String)}
  AND (happened_at, source_id) IN (
      SELECT timestamp, dedup_id FROM conversions
      WHERE project_id = {project:String} AND dedup_id IN {ids:Array(String)})
"""
_PAYOUTS = f"""
SELECT project_id, payout_id, source_id, source_type, kind, role, level, recipient_identifier_type,
       recipient_identifier, toString(amount) AS amount, currency, currency_chain_id, currency_name,
       currency_decimals, happened_at, code, capped_in
FROM payouts {_OF_EVENTS} AND source_type = 'conversion'
ORDER BY happened_at, payout_id
"""
_VOLUMES = f"""
SELECT project_id, source_id, level, affiliate_identifier_type, affiliate_identifier, toString(base) AS base,
       toString(counted_base) AS counted_base, happened_at
FROM affiliate_volumes {_OF_EVENTS}
ORDER BY happened_at, source_id, level
"""


@dataclass
class Paid:
    """What an event paid, as the warehouse holds it: its conversion's row, its payouts' and its volumes'."""

    conversion: dict
    payouts: list[dict] = field(default_factory=list)
    volumes: list[dict] = field(default_factory=list)


class Reversal(Handler):
    record_type = ReversalRecord

    def written_key(self, record: ReversalRecord) -> tuple[str, str]:
        return dedup_archive.REVERSAL, record.id

    async def plan(
        self, project_id: str, project: Project, records: list, state: StateStore, warehouse: Warehouse
    ) -> None:
        if not records:
            return
        ids = sorted({record.dedup_id for record in records})
        # An event is written whole once its `dedup_ids` row is (its delivery's last insert), or once the state store
        # marked it (after that insert; its `dedup_ids` row may have left the window since): its conversion row alone
        # may be another worker's delivery half-way through its inserts.
        keys = [(dedup_archive.EVENT, dedup_id) for dedup_id in ids]
        written = await dedup_archive.written_among(warehouse, project_id, keys, 10 * 365 * 86400)
        project.set_aside_events = {dedup_id for (_, dedup_id), status in written.items() if status == "failed"}
        await _wait_for_accepted(project_id, [d for d in ids if (dedup_archive.EVENT, d) not in written], state)
        params = {"project": project_id, "ids": [d for d in ids if d not in project.set_aside_events]}
        paid = {row["dedup_id"]: Paid(row) for row in await warehouse.query(_CONVERSIONS, params)}
        for row in await warehouse.query(_PAYOUTS, params):
            paid[row["source_id"]].payouts.append(row)
        for row in await warehouse.query(_VOLUMES, params):
            paid[row["source_id"]].volumes.append(row)
        project.reversing = paid

    def add(self, record: ReversalRecord, project: Project, writes: Writes, created: int) -> None:
        paid = project.reversing.get(record.dedup_id)
        if paid is None and record.dedup_id not in project.set_aside_events:
            raise LookupError(f"its event {record.dedup_id} was never written, and the state store has it not accepted")
        shares = Decimal(record.reversed_before), Decimal(record.reversed_after)
        found = {} if paid is None else _rows(record, paid, shares, created)
        writes.rows["reversals"].append(reversal_row(record))
        for table, table_rows in found.items():
            writes.rows[table] += table_rows
        reversing = found.get("payouts", [])
        if project.limits and reversing:
            at_ms = int(paid.conversion["timestamp_ms"])
            give_back_rows(reversing, at_ms, project.limits, writes.given_back[record.project_id])
        writes.take_backs[record.project_id] += _token_parts(record.project_id, reversing)
        writes.rows["dedup_ids"].append(self.written_row(record))
        marked = writes.reversed[record.project_id]
        marked[record.dedup_id] = max(marked.get(record.dedup_id, shares[1]), shares[1])


async def _wait_for_accepted(project_id: str, dedup_ids: list[str], state: StateStore) -> None:
    """Raise Waiting if one of the events is accepted but not written yet (its partition is behind this one's)."""
    for dedup_id in dedup_ids:
        if await state.event_status(project_id, dedup_id) == "accepted":
            raise Waiting(f"the reversed event {dedup_id} of project {project_id} is accepted, not yet written")


def _token_parts(project_id: str, reversing: list[dict]) -> list[tuple[TakeBack, dict]]:
    """The token parts of reversing payout rows: each out of its payout's claim check, or owed (API.md §9)."""
    parts = []
    for row in reversing:
        if row["currency"] != "point":
            paid_id = row["payout_id"].partition(REVERSAL_PART)[0]
            user = User(row["recipient_identifier"], row["recipient_identifier_type"])
            units = -int(Decimal(row["amount"]))
            parts.append((TakeBack(check_id(project_id, paid_id), user, currency_key(row["currency"]), units), row))
    return parts


def give_back_rows(reversing: list[dict], at_ms: int, limits: Limits, tallies: dict[tuple, Tally]) -> None:
    """The units of an event's reversing payout rows that a cap or budget governs, tallied per user, side, currency
    and the counters the payout was counted in (its row's `capped_in`; a row without one was counted in this delivery,
    as the limits count) at the event's time `at_ms` (as they were counted: stream_workers.capped)."""
    for row in reversing:
        if (key := row_key(row, limits)) is None:
            continue
        counted = row.get("capped_in")
        if (tally := tallies.get((*key, counted))) is None:
            tally = tallies[(*key, counted)] = Tally(*key, counted=counted)
        tally.add(to_units(-Decimal(row["amount"]), key[2]), at_ms)


def _rows(record: ReversalRecord, paid: Paid, shares: tuple[Decimal, Decimal], created: int) -> dict[str, list[dict]]:
    """What the reversal takes back, by table: a reversing row per payout, per volume row, and the user's own."""

    def back(amount: str, is_points: bool = True) -> Decimal:
        return -taken_back(Decimal(amount), *shares, is_points)

    conversion = paid.conversion
    amounts = {name: back(conversion[name]) for name in ("volume", "revenue", "counted_volume", "counted_revenue")}
    texts = {name: format_amount(amount) for name, amount in amounts.items()}
    payouts = []
    for payout in paid.payouts:
        amount = back(payout["amount"], payout["currency"] == "point")
        if amount:
            commission = payout["kind"] == "affiliate_commission"
            payouts.append({
                **payout,
                "payout_id": reversing_payout_id(payout["payout_id"], record.id),
                "amount": format_amount(amount),
                "created_at": rows.ch_datetime(created),
                "reversal": record.id,
                "counted_volume": texts["counted_volume"] if commission else "0",
                "counted_revenue": texts["counted_revenue"] if commission else "0",
            })  # fmt: skip
    volumes = [
        {**volume, "base": format_amount(back(volume["base"])),
         "counted_base": format_amount(back(volume["counted_base"])), "reversal": record.id, **texts}
        for volume in paid.volumes
    ]  # fmt: skip
    own = {
        "project_id": record.project_id,
        "reversal": record.id,
        "dedup_id": record.dedup_id,
        "user_identifier_type": conversion["user_identifier_type"],
        "user_identifier": conversion["user_identifier"],
        "timestamp": conversion["timestamp"],
        "name": conversion["name"],
        "args": conversion["args"],
        **texts,
    }
    volumes = [v for v in volumes if any(Decimal(v[n]) for n in ("base", "counted_base", *texts))]
    owns = [own] if any(amounts.values()) else []
    return {"payouts": payouts, "affiliate_volumes": volumes, "conversion_reversals": owns}
