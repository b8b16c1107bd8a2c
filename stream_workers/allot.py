"""The allot step of a delivery (between compute and write): what caps and budgets let through of its payouts
(API.md §8), asked of the state store (rewards.ports.AllotmentStore) in two atomic steps per project:

1. its tallies (one per user, side and currency: stream_workers.capped), decided at once: a user far from its caps
   is granted them whole, and the rows built for them stand; a currency whose budget is spent pays nothing more;
2. only if some tally was left to it, the payouts of those tallies, one by one in order.

A payout granted less than it asked becomes two rows under one id: the part paid, and the rest rejected with the rule
that cut it (`cap_exceeded`, `budget_exhausted`). Each call's answer is kept under a token of the delivery's until
its rows are written (`forget` runs in the delivery's mark), so a delivery computed again after a crash (the same
records: the plans keep a delivery the same) gets the same answers and counts nothing twice; once written, its
records are never computed again (stream_workers.written). Calls carry at most CHUNK tallies or payouts, so that no
one call holds Redis long.

Reversals' state changes happen here too, each once per delivery token (API.md §9): their units back to caps and
budgets first (room for what follows), their token parts out of open claim checks or owed, and, last, every new
check settles its recipient's debt in its currency first."""

from collections.abc import Awaitable, Callable
from decimal import Decimal

from rewards.domain.allotment import (
    EXHAUSTED,
    ONE_BY_ONE,
    WHOLE,
    Ask,
    Limits,
    UnseededBudgets,
    counted_in,
    currency_key,
    from_units,
    to_units,
)
from rewards.domain.integrity import Rejection
from rewards.domain.reversals import Owed
from rewards.domain.timestamps import now_ms
from rewards.ports import StateStore, Warehouse
from schemas.clickhouse.budgets import paid_in
from stream_workers import rows
from stream_workers.capped import Pending, row_key
from stream_workers.handlers.base import Project, Unusable
from stream_workers.writes import Writes

CHUNK = 1000
_NOTHING = (Decimal(0), Rejection.BUDGET_EXHAUSTED)


async def allot(
    writes: Writes, projects: dict[str, Project | Unusable], state: StateStore, warehouse: Warehouse, token: str
) -> None:
    """Cut the delivery's payout rows (written as if paid whole) as caps and budgets decide. `token`: the
    delivery's, under which the answers are kept until `forget`."""
    for project_id, tallies in writes.given_back.items():  # a reversal's units first: room for what follows
        if tallies:
            limits = projects[project_id].limits
            await state.give_back(project_id, f"{token}:given_back", limits, list(tallies.values()))
    capped = {project_id: projects[project_id].limits for project_id, pend in writes.capped.items() if pend.tallies}
    for project_id, limits in capped.items():
        await _allot_project(writes, project_id, writes.capped[project_id], limits, state, warehouse, token)
    _mark_counted(writes, capped)
    writes.capped.clear()
    writes.given_back.clear()
    for project_id, parts in writes.take_backs.items():
        if parts:
            await _take_back(writes, project_id, parts, state, token)
    writes.take_backs.clear()
    for project_id, held in writes.held.items():  # before the write: listed (written) only once held
        await state.hold_payouts(project_id, held)
    # Last, the new checks as caps and budgets left them settle their recipients' debts (asked whatever the debts
    # now: a delivery processed again after a crash gets the answer it got, kept under its token), then are
    # registered before the write: a check readable in the warehouse (its event's status answers `processed`, from
    # the archive, the moment its rows are written) is one the state store can close. Both idempotent.
    for project_id, checks in writes.new_checks.items():
        if checks:
            asks = [Owed(check.user, currency_key(check.currency), check.amount) for check in checks]
            settled = await state.settle_debts(project_id, f"{token}:settle", asks)
            writes.settle_checks(project_id, settled, now_ms())
            await state.register_claim_checks(project_id, writes.new_checks[project_id])


async def _take_back(writes: Writes, project_id: str, parts: list, state: StateStore, token: str) -> None:
    """Reversals' token parts out of their open claim checks (their new versions written), the rest owed."""
    checks, owed = await state.take_back(project_id, f"{token}:take_back", [item for item, _ in parts])
    writes.rows["claim_checks"] += [rows.claim_check_row(project_id, check) for check in checks]
    created = now_ms()
    for (item, row), units in zip(parts, owed, strict=True):
        if units:
            debt = rows.debt_row(project_id, item.user, rows.currency_of(row), units, row["payout_id"], created)
            writes.rows["debts"].append(debt)


async def forget(writes: Writes, state: StateStore) -> None:
    """Once the rows are written: their answers are no longer needed (their records are never computed again)."""
    for project_id, deliveries in writes.allotted.items():
        await state.forget_grants(project_id, deliveries)


async def _allot_project(
    writes: Writes, project_id: str, pending: Pending, limits: Limits, state: StateStore, warehouse: Warehouse, token
) -> None:
    ask = _Asking(writes.allotted[project_id], _Seeds(project_id, warehouse))
    tallies = list(pending.tallies.values())
    verdicts: list[str] = []
    for n, start in enumerate(range(0, len(tallies), CHUNK)):
        chunk = tallies[start : start + CHUNK]
        verdicts += await ask(f"{token}:{n}", lambda t, s, c=chunk: state.allot_tallies(project_id, t, limits, c, s))
    left = {key: verdict for key, verdict in zip(pending.tallies, verdicts, strict=True) if verdict != WHOLE}
    if not left:  # the common case: the rows written as if paid whole stand
        return
    cuts: dict[int, tuple[Decimal, Rejection]] = {}  # by place in the delivery's payout rows
    asks, places = [], []  # the payouts to decide one by one, in order, and their places
    for place, row, key, units in _governed_rows(writes, {project_id: limits}):
        if (verdict := left.get(key)) == EXHAUSTED:
            cuts[place] = _NOTHING
        elif verdict == ONE_BY_ONE:
            asks.append(Ask(row["payout_id"], *key, units, rows.ms_of(row["happened_at"])))
            places.append(place)
    for n, start in enumerate(range(0, len(asks), CHUNK)):
        chunk = asks[start : start + CHUNK]
        grants = await ask(f"{token}:each:{n}", lambda t, s, c=chunk: state.allot(project_id, t, limits, c, s))
        for place, asked, granted in zip(places[start : start + CHUNK], chunk, grants, strict=True):
            if granted.rejection is not None:
                cuts[place] = (from_units(granted.units, asked.currency), granted.rejection)
    writes.cut_payouts(project_id, cuts)


def _mark_counted(writes: Writes, limits_of: dict[str, Limits]) -> None:
    """Each paid row granted (once every project's cuts are made: a cut's rejected rest is a copy of its row) keeps
    the user's counters it was counted in (`capped_in`), for a reversal to give back to those only
    (rewards.domain.allotment.given_back). One pass over the delivery's rows for all its projects."""
    for _, row, (_, side, currency), _ in _governed_rows(writes, limits_of):
        row["capped_in"] = counted_in(limits_of[row["project_id"]], currency, side)


def _governed_rows(writes: Writes, limits_of: dict[str, Limits]):
    """The paid rows of these projects that a cap or budget governs, in order: (place, row, tally key, units). As
    capped.Pending.tally counts them, read back from the rows."""
    for place, row in enumerate(writes.rows["payouts"]):
        if (limits := limits_of.get(row["project_id"])) is None or row["amount"] == "0" or row.get("reversal"):
            continue  # (a reversing movement is given back, not granted: stream_workers/handlers/payout_decision.py)
        if (key := row_key(row, limits)) is not None:
            yield place, row, key, to_units(Decimal(row["amount"]), key[2])


class _Seeds:
    """The warehouse's paid sums of budgets the state store has no counter of, read once per delivery and project."""

    def __init__(self, project_id: str, warehouse: Warehouse):
        self._project_id, self._warehouse = project_id, warehouse
        self.units: dict[str, int] = {}

    async def add(self, currencies: list[str]) -> None:
        held = await paid_in(self._warehouse, self._project_id, currencies)
        self.units |= {currency: to_units(held.get(currency, Decimal(0)), currency) for currency in currencies}


class _Asking:
    """One call of the state store's under a token of the delivery's (kept, to forget once written), asked again
    with seeds when a budget it meets has no paid counter yet (a budget set since the last payout in its currency)."""

    def __init__(self, tokens: list[str], seeds: _Seeds):
        self._tokens, self._seeds = tokens, seeds

    async def __call__(self, token: str, call: Callable[[str, dict[str, int] | None], Awaitable]):
        self._tokens.append(token)
        try:
            return await call(token, self._seeds.units or None)
        except UnseededBudgets as unseeded:
            await self._seeds.add(unseeded.currencies)
            return await call(token, self._seeds.units)
