"""The reference book of caps and budgets: rewards.domain.allotment.Book in memory, which both adapters must match."""

from collections import defaultdict

from rewards.domain import allotment
from rewards.domain.allotment import Limits, Tally
from rewards.domain.payouts import User


class MemoryBook:
    def __init__(self, seeds: dict[str, int] | None = None):
        self.paid_units: dict[str, int] = dict(seeds or {})
        self.totals: dict[tuple, int] = defaultdict(int)
        self.months: dict[tuple, int] = defaultdict(int)
        self.grants_by_time: dict[tuple, list[tuple[int, int]]] = defaultdict(list)

    def paid(self, currency: str) -> int | None:
        return self.paid_units.get(currency)

    def total(self, side: str, currency: str, user: User) -> int:
        return self.totals[side, currency, user]

    def month(self, side: str, currency: str, user: User, month: str) -> int:
        return self.months[side, currency, user, month]

    def history(self, side: str, currency: str, user: User, after_ms: int, before_ms: int) -> list[tuple[int, int]]:
        return [(t, u) for t, u in self.grants_by_time[side, currency, user] if after_ms < t < before_ms]

    def count(self, granted: list[Tally], limits: Limits) -> None:
        for tally in granted:
            if tally.currency in limits.budgets:
                self.paid_units[tally.currency] += tally.units
            counts = limits.counts(tally.currency, tally.side)
            who = (tally.side, tally.currency, tally.user)
            if "t" in counts:
                self.totals[who] += tally.units
            for at, units in tally.times.items():
                if "m" in counts:
                    self.months[*who, allotment.calendar_month(at)] += units
                if "h" in counts:
                    self.grants_by_time[who].append((at, units))
