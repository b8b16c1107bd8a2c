"""The allot step of a delivery (between compute and write): what caps and budgets let through of its payouts
(API.md §8), asked of the state store in one atomic call per project (rewards.ports.AllotmentStore), then the rows.

A payout granted less than it asked becomes two rows under one id: the part paid, and the rest rejected with the rule
that cut it (`cap_exceeded`, `budget_exhausted`). The grants are kept under the delivery's token until its rows are
written (`forget` runs in the delivery's mark), so a delivery computed again after a crash (the same records: the
plans keep a delivery the same) gets the same grants and counts nothing twice; once written, its records are never
computed again (stream_workers.written)."""

from decimal import Decimal

from rewards.domain.allotment import END_USER, REFERRER, Ask, Grant, Limits, UnseededBudgets, from_units, to_units
from rewards.domain.integrity import Rejection
from rewards.ports import StateStore, Warehouse
from schemas.clickhouse.budgets import paid_in
from stream_workers import rows
from stream_workers.handlers.base import Project, Unusable
from stream_workers.writes import Capped, Writes


async def allot(
    writes: Writes, projects: dict[str, Project | Unusable], state: StateStore, warehouse: Warehouse, token: str
) -> None:
    """Turn the delivery's capped payouts (Writes.capped) into rows, as their grants allow. `token`: the delivery's,
    under which its grants are kept until `forget`."""
    for project_id, capped in writes.capped.items():
        limits = projects[project_id].limits
        asks, places = [], []  # each ask, and where its payout is: (its source in `capped`, its index there)
        for number, source in enumerate(capped):
            for index, ask in _asks(source, limits):
                asks.append(ask)
                places.append((number, index))
        grants = await _granted(state, warehouse, project_id, token, limits, asks)
        cuts: list[dict[int, tuple[Decimal, Rejection]]] = [{} for _ in capped]
        for (number, index), ask, granted in zip(places, asks, grants, strict=True):
            if granted.rejection is not None:
                cuts[number][index] = (from_units(granted.units, ask.currency), granted.rejection)
        for source, cut in zip(capped, cuts, strict=True):
            rows_of = rows.source_rows(source.source, source.payouts, source.created_ms, source.verdicts, cut)
            writes.add_payouts(project_id, rows_of)
        if asks:
            writes.allotted[project_id].append(token)
    writes.capped.clear()


async def forget(writes: Writes, state: StateStore) -> None:
    """Once the rows are written: their grants are no longer needed (their records are never computed again)."""
    for project_id, deliveries in writes.allotted.items():
        await state.forget_grants(project_id, deliveries)


def _asks(capped: Capped, limits: Limits) -> list[tuple[int, Ask]]:
    """The source's payouts that caps or budgets govern, each with its index among the source's payouts."""
    found = []
    prefix, at, verdicts = rows.payout_id(capped.source, ""), capped.source.happened_at_ms, capped.verdicts
    for index, payout in enumerate(capped.payouts):
        currency = limits.key_if_governed(payout.currency)
        if currency is None or not payout.amount or (verdicts is not None and verdicts[index] is not None):
            continue
        side = REFERRER if payout.role == "affiliate" else END_USER  # (allotment.END_USER, REFERRER)
        found.append(
            (index, Ask(f"{prefix}{index}", payout.recipient, side, currency, to_units(payout.amount, currency), at))
        )
    return found


async def _granted(
    state: StateStore, warehouse: Warehouse, project_id: str, token: str, limits: Limits, asks: list[Ask]
) -> list[Grant]:
    if not asks:
        return []
    try:
        return await state.allot(project_id, token, limits, asks)
    except UnseededBudgets as unseeded:  # a budget set since the last payout in its currency: from what was paid
        held = await paid_in(warehouse, project_id, unseeded.currencies)
        seeds = {currency: to_units(held.get(currency, Decimal(0)), currency) for currency in unseeded.currencies}
        return await state.allot(project_id, token, limits, asks, seeds)
