"""The reference book of caps and budgets: rewards.domain.allotment.Book in memory, which both adapters must match."""

from collections import defaultdict

from rewards.domain import allotment
from rewards.domain.allotment import Ask, Grant, Limits
from rewards.domain.payouts import User


class MemoryBook:
    def __init__(self, seeds: dict[str, int] | None = None):
        self.grants: dict[str, Grant] = {}
        self.paid_units: dict[str, int] = dict(seeds or {})
        self.totals: dict[tuple, int] = defaultdict(int)
        self.months: dict[tuple, int] = defaultdict(int)
        self.grants_by_time: dict[tuple, list[tuple[int, int]]] = defaultdict(list)

    def granted(self, payout_ids) -> dict[str, Grant]:
        return {payout_id: self.grants[payout_id] for payout_id in payout_ids if payout_id in self.grants}

    def paid(self, currency: str) -> int | None:
        return self.paid_units.get(currency)

    def total(self, side: str, currency: str, user: User) -> int:
        return self.totals[side, currency, user]

    def month(self, side: str, currency: str, user: User, month: str) -> int:
        return self.months[side, currency, user, month]

    def history(self, side: str, currency: str, user: User, after_ms: int, before_ms: int) -> list[tuple[int, int]]:
        return [(t, u) for t, u in self.grants_by_time[side, currency, user] if after_ms < t < before_ms]

    def record(self, granted, limits: Limits) -> None:
        for ask, grant in granted:
            self._record(ask, grant, limits)

    def _record(self, ask: Ask, grant: Grant, limits: Limits) -> None:
        self.grants[ask.payout_id] = grant
        if grant.units == 0:
            return
        if ask.currency in limits.budgets:
            self.paid_units[ask.currency] += grant.units
        if ask.currency in limits.caps:
            self.totals[ask.side, ask.currency, ask.user] += grant.units
            self.months[ask.side, ask.currency, ask.user, allotment.calendar_month(ask.at_ms)] += grant.units
            if limits.history_ms(ask.currency):
                self.grants_by_time[ask.side, ask.currency, ask.user].append((ask.at_ms, grant.units))
