"""How much of each payout caps and budgets let through (API.md §8): the rule, pure and exact.

Amounts are counted in integer units, exact in any engine: points in their smallest unit (10^-18), tokens in their raw
smallest unit. A payout asks for its units (`Ask`); the state store's atomic step (SQLite's transaction, Redis's
scripts: lua/allot.lua mirrors `allot_each` and lua/allot_tallies.lua `allot_tallies` line for line, and the contract
tests hold both adapters to the same answers) looks up what the rules counted so far (`Book`), grants what fits, and
counts it in:

- a budget's room: its amount less everything paid in its currency;
- a cap's room over a calendar month or all time: its amount less what its side(s) of the user were granted there;
- a rolling cap's room at a payout's event time t, whatever the order in which events are processed: no window of
  its length that holds t may exceed the cap once the payout is granted, so the room is the cap less the most that
  any such window, (e − W, e] with e in [t, t + W), already holds (`rolling_room`);
- the grant: the payout, or the least room when smaller (never below 0), and the rule that cut it.

A delivery takes it in two steps (`allot`): its tallies (a user's payouts of one side and currency, summed) are
granted whole at once where the user is far from its caps, and only the rest is decided payout by payout. Each step's
answer is kept under a token of the delivery's until its rows are written, so the same delivery computed again after
a crash gets the same answers, counted once (rewards.ports.AllotmentStore).

What cannot be checked exactly is refused (`cap_exceeded`), never let through: a payout under a rolling or
calendar-month cap whose event is older than the counters kept for it (`KEPT_MS` past the window).
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from functools import cached_property, lru_cache
from typing import NamedTuple, Protocol

from rewards.domain.amounts import EXACT
from rewards.domain.integrity import Rejection
from rewards.domain.limits import parse_duration_ms
from rewards.domain.payout_config import PayoutConfig, TokenCurrency
from rewards.domain.payouts import User

POINT = "point"
POINT_PLACES = 18
# How long counters outlive their window: the dedup window (a redelivery within it is recognised by its grants).
DAY_MS = 86_400_000
KEPT_MS = 35 * DAY_MS
GRANTS_KEPT_MS = KEPT_MS  # a delivery's grants never forgotten (a crash after its write) are dropped then
RELEASES_KEPT_MS = KEPT_MS  # an expired claim check's release is remembered this long (the sweep meets it for seconds)
# What a payout is earned as (API.md §8): as a referrer (role "affiliate": commissions, referral rewards), or as the
# user (end-user rewards, campaign bonuses, the referred user's referral reward, rebates).
END_USER, REFERRER = "end_user", "referrer"
SIDES_OF = {END_USER: (END_USER,), REFERRER: (REFERRER,), "wallet": (END_USER, REFERRER)}
ALL_TIME, CALENDAR_MONTH = "all_time", "calendar_month"


def currency_key(currency: str | TokenCurrency) -> str:
    """How caps and budgets name a payout's currency: `point`, or the token's address in lowercase."""
    return currency.address.lower() if isinstance(currency, TokenCurrency) else currency.lower()


def to_units(amount: Decimal, currency: str) -> int:
    """An amount in integer units (points: ×10^18; a token's raw units as they are). Payouts carry at most 18 places
    (rewards.domain.amounts.to_points): exact (scaled in EXACT's 120 digits: the default context keeps 28, and a
    points amount of 10^10 with 18 places has 29)."""
    return int(amount.scaleb(POINT_PLACES, EXACT)) if currency == POINT else int(amount)


def from_units(units: int, currency: str) -> Decimal:
    return Decimal(units).scaleb(-POINT_PLACES, EXACT) if currency == POINT else Decimal(units)


@dataclass(frozen=True)
class Room:
    """What one rule still lets through, and the rejection that names it when it is what cuts a payout."""

    units: int
    rule: Rejection


# Tuples rather than frozen dataclasses: one of each per payout, where a frozen dataclass costs a microsecond to build.
class Grant(NamedTuple):
    units: int  # what is paid: the payout, or less
    rejection: Rejection | None  # why the rest is refused; None when nothing is


class Ask(NamedTuple):
    """A payout asking for its units, under the caps and budget of its currency."""

    payout_id: str
    user: User
    side: str  # END_USER | REFERRER
    currency: str  # currency_key
    units: int
    at_ms: int  # its event's time: what its windows hold


@dataclass(frozen=True)
class CapRule:
    sides: tuple[str, ...]  # the sides it counts (SIDES_OF its applies_to)
    units: int
    window: str  # ALL_TIME | CALENDAR_MONTH | "rolling"
    window_ms: int = 0  # a rolling window's length


@dataclass(frozen=True)
class Limits:
    """A project's caps and budgets, by currency, in units: what `allot` needs of its configuration."""

    budgets: dict[str, int] = field(default_factory=dict)
    caps: dict[str, tuple[CapRule, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.budgets or self.caps)

    def governs(self, currency: str) -> bool:
        return currency in self.budgets or currency in self.caps

    def key_if_governed(self, currency: str | TokenCurrency) -> str | None:
        """A payout currency's key (currency_key) if a cap or budget governs it, else None; looked up once per
        currency (a per-payout hot path)."""
        try:
            return self._governed[currency]
        except KeyError:
            key = currency_key(currency)
            found = self._governed[currency] = key if self.governs(key) else None
            return found

    @cached_property
    def _governed(self) -> dict:
        return {}

    def counts(self, currency: str, side: str) -> str:
        """What a grant of `side` in `currency` is counted in, for the caps covering that side to read: "t" its all-time
        total (all-time and rolling caps), "m" its calendar month (calendar-month caps), "h" its grants by time
        (rolling caps); "" none. Of side "wallet": what the caps covering both sides read."""
        return self._counts.get((currency, side), "")

    @cached_property
    def _counts(self) -> dict[tuple[str, str], str]:
        found = {}
        for currency, caps in self.caps.items():
            for side in (END_USER, REFERRER, "wallet"):
                covering = SIDES_OF[side]
                windows = {cap.window for cap in caps if set(covering) <= set(cap.sides)}
                kinds = ("t" if windows & {ALL_TIME, "rolling"} else "") + ("m" if CALENDAR_MONTH in windows else "")
                found[currency, side] = kinds + ("h" if "rolling" in windows else "")
        return found

    def history_ms(self, currency: str) -> int:
        """How long a currency's grants are kept for its rolling caps (0: it has none)."""
        return self._history_ms.get(currency, 0)

    @cached_property
    def _history_ms(self) -> dict[str, int]:
        kept = {}
        for currency, caps in self.caps.items():
            if rolling := [cap.window_ms for cap in caps if cap.window == "rolling"]:
                kept[currency] = max(rolling) + KEPT_MS
        return kept


def limits_of(config: PayoutConfig) -> Limits:
    caps: dict[str, list[CapRule]] = {}
    for cap in config.caps:
        named = cap.window in (ALL_TIME, CALENDAR_MONTH)
        rule = CapRule(
            SIDES_OF[cap.applies_to],
            to_units(cap.amount, cap.currency),
            cap.window if named else "rolling",
            0 if named else parse_duration_ms(cap.window),
        )
        caps.setdefault(cap.currency, []).append(rule)
    budgets = {budget.currency: to_units(budget.amount, budget.currency) for budget in config.budgets}
    return Limits(budgets, {currency: tuple(rules) for currency, rules in caps.items()})


def fingerprint(asks: Sequence[Ask]) -> str:
    """What a delivery asked, in a few bytes: its grants are given again only to the same asks."""
    asked = "\x1f".join(f"{ask.payout_id}\x1e{ask.units}" for ask in asks)
    return hashlib.blake2b(asked.encode(), digest_size=16).hexdigest()


def cuts_of(asks: Sequence[Ask], grants: Sequence[Grant]) -> list:
    """The grants not whole, as a delivery keeps them: [index, units (text), rule, …] flat."""
    found: list = []
    for index, (ask, given) in enumerate(zip(asks, grants, strict=True)):
        if given.rejection is not None or given.units != ask.units:
            found += [index, str(given.units), given.rejection or ""]
    return found


def grants_of(asks: Sequence[Ask], cuts: Sequence) -> list[Grant]:
    """The grants a delivery kept (`cuts_of`): whole but for its cuts."""
    grants = [Grant(ask.units, None) for ask in asks]
    for i in range(0, len(cuts), 3):
        grants[int(cuts[i])] = Grant(int(cuts[i + 1]), Rejection(cuts[i + 2]) if cuts[i + 2] else None)
    return grants


class Tally:
    """One user's payouts of one side and currency in a delivery, summed: what caps and budgets decide at once when
    the user is far from its caps (`allot_tallies`). `times`: the units asked at each event time (ms)."""

    __slots__ = ("counted", "currency", "side", "times", "units", "user")

    def __init__(
        self, user: User, side: str, currency: str, units: int = 0, times: dict[int, int] | None = None,
        counted: str | None = None,
    ):  # fmt: skip
        """`counted`, of units given back: the user's counters ("t", "m") their payouts were counted in when paid
        (`counted_in`, kept on the payout row); None: those the limits count now (units counted in this delivery)."""
        self.user, self.side, self.currency = user, side, currency
        self.units, self.times, self.counted = units, {} if times is None else times, counted

    def add(self, units: int, at_ms: int) -> None:
        self.units += units
        self.times[at_ms] = self.times.get(at_ms, 0) + units

    def months(self) -> dict[str, int]:
        """Its units by calendar month (the key of a calendar-month cap's counter)."""
        found: dict[str, int] = {}
        for at, units in self.times.items():
            month = calendar_month(at)
            found[month] = found.get(month, 0) + units
        return found

    def __repr__(self) -> str:
        return f"Tally{(self.user, self.side, self.currency, self.units, self.times)}"


def tallied(asks: Sequence[Ask]) -> tuple[list[Tally], list[int]]:
    """The tallies of `asks` (one per user, side and currency, in the order of their first ask), and each ask's
    tally. (The workers build theirs straight from payouts: stream_workers.capped.)"""
    tallies: dict[tuple, int] = {}
    found: list[Tally] = []
    of = []
    for ask in asks:
        key = (ask.user, ask.side, ask.currency)
        if (number := tallies.get(key)) is None:
            number = tallies[key] = len(found)
            found.append(Tally(ask.user, ask.side, ask.currency))
        found[number].add(ask.units, ask.at_ms)
        of.append(number)
    return found, of


# What `allot_tallies` decides of a tally: all of it granted (and counted), none of it (its budget is spent: each of
# its payouts gets 0, `budget_exhausted`; nothing counted), or to be decided payout by payout (`allot_each`).
WHOLE, EXHAUSTED, ONE_BY_ONE = "W", "E", "1"


class GivenBack(NamedTuple):
    """Units a counter gets back: `counter` "paid" (a budget's: `field` the currency), "total" or "month:<YYYY-MM>" (a
    user's: its side, currency and user)."""

    counter: str
    currency: str
    side: str = ""
    user: User | None = None
    units: int = 0


def given_back(tallies: Sequence[Tally], limits: Limits) -> list[GivenBack]:
    """What a reversal gives back to caps and budgets (API.md §9): the counters its payouts were counted in, as
    `count` counts a grant, each dropping by the units taken back (never below 0, by the store). A user's counters
    get back only what they counted (`Tally.counted`): a payout made before its cap was set was never counted, and
    giving it back would leave room for more than the cap. A budget's paid counter starts from everything paid in its
    currency (UnseededBudgets), so it always gets the units back. A rolling cap's grants by time are not given back:
    the units stay in its window until they leave it (a cap the reversal leaves stricter, never looser)."""
    found = []
    for tally in tallies:
        if tally.currency in limits.budgets:
            found.append(GivenBack("paid", tally.currency, units=tally.units))
        counts = limits.counts(tally.currency, tally.side) if tally.counted is None else tally.counted
        if "t" in counts:
            found.append(GivenBack("total", tally.currency, tally.side, tally.user, tally.units))
        if "m" in counts:
            found += [GivenBack(f"month:{month}", tally.currency, tally.side, tally.user, units)
                      for month, units in tally.months().items()]  # fmt: skip
    return found


def counted_in(limits: Limits, currency: str, side: str) -> str:
    """The user's counters a payout granted now is counted in and a reversal may give back ("t", "m"; the rolling
    caps' grants by time are never given back): what a paid payout row keeps as `capped_in`."""
    return limits.counts(currency, side).replace("h", "")


class UnseededBudgets(Exception):
    """Budgets whose paid counter the store does not hold yet (set since the last payout in their currency): the
    caller seeds them with what the warehouse holds paid, and asks again."""

    def __init__(self, currencies: Sequence[str]):
        super().__init__(", ".join(currencies))
        self.currencies = list(currencies)


class Book(Protocol):
    """What the rules counted so far, as the state store's atomic step sees it (and counts in)."""

    def paid(self, currency: str) -> int | None: ...  # None: unseeded
    def total(self, side: str, currency: str, user: User) -> int: ...
    def month(self, side: str, currency: str, user: User, month: str) -> int: ...
    def history(self, side: str, currency: str, user: User, after_ms: int, before_ms: int) -> list[tuple[int, int]]: ...
    def count(self, granted: Sequence[Tally], limits: Limits) -> None:
        """Count granted units (each tally's, at its times) in the currency's paid counter (if it has a budget) and in
        what the caps covering the tally's side read (`limits.counts`): the user's all-time total, its month counters,
        its grants by time (kept `limits.history_ms(currency)` past their time)."""


def allot_each(asks: Sequence[Ask], limits: Limits, book: Book, now_ms: int) -> list[Grant]:
    """The rule: each ask's grant, in order, each counted in before the next is decided (a payout asked again in the
    same call gets its first ask's grant, counted once); UnseededBudgets (nothing counted) when a budget's paid counter
    is not in the book."""
    _check_seeded({ask.currency for ask in asks}, limits, book)
    grants: list[Grant] = []
    first: dict[str, Grant] = {}
    for ask in asks:
        if (earlier := first.get(ask.payout_id)) is not None:
            grants.append(Grant(min(earlier.units, ask.units), earlier.rejection))
            continue
        decided = first[ask.payout_id] = grant(ask.units, rooms(ask, limits, book, now_ms))
        if decided.units:
            book.count([Tally(ask.user, ask.side, ask.currency, decided.units, {ask.at_ms: decided.units})], limits)
        grants.append(decided)
    return grants


def allot_tallies(tallies: Sequence[Tally], limits: Limits, book: Book, now_ms: int) -> list[str]:
    """The common case at once: each tally's verdict (WHOLE, EXHAUSTED, ONE_BY_ONE), the WHOLE ones counted.

    A user whose tallies all fit under every cap of their currency (their sums beside what the caps counted), in a
    currency whose budget all the currency's tallies fit in, is granted them whole, whatever their order (each of its
    payouts would be granted whole one by one); in a currency whose budget is spent, every payout gets 0. The rest
    is decided payout by payout (`allot_each`), in order, after these: the same grants as `allot_each` over all the
    delivery's payouts (tests/domain/test_allotment.py holds the two together). So a delivery far from its limits
    costs a few reads per user rather than per payout."""
    _check_seeded({tally.currency for tally in tallies}, limits, book)
    verdicts = [ONE_BY_ONE] * len(tallies)
    by_currency: dict[str, list[int]] = {}
    for number, tally in enumerate(tallies):
        by_currency.setdefault(tally.currency, []).append(number)
    whole: list[Tally] = []
    for currency, numbers in by_currency.items():
        if (budget := limits.budgets.get(currency)) is not None:
            paid = book.paid(currency) or 0
            if paid >= budget:  # every ask's room is 0, and a budget is named before a cap leaving as little
                for number in numbers:
                    verdicts[number] = EXHAUSTED
                continue
            if paid + sum(tallies[number].units for number in numbers) > budget:
                continue  # the budget may bind: order matters
        by_user: dict[User, list[int]] = {}
        for number in numbers:
            by_user.setdefault(tallies[number].user, []).append(number)
        caps = limits.caps.get(currency, ())
        for own in by_user.values():
            if all(_fits(cap, [tallies[number] for number in own], book, now_ms) for cap in caps):
                for number in own:
                    verdicts[number] = WHOLE
                    whole.append(tallies[number])
    book.count(whole, limits)
    return verdicts


def allot(asks: Sequence[Ask], limits: Limits, book: Book, now_ms: int) -> list[Grant]:
    """Both steps as a delivery takes them (each payout asked once): `allot_tallies`, then `allot_each` over the
    payouts of the tallies it left; the same grants as `allot_each` over all of them."""
    tallies, of = tallied(asks)
    verdicts = allot_tallies(tallies, limits, book, now_ms)
    left = [ask for ask, number in zip(asks, of, strict=True) if verdicts[number] == ONE_BY_ONE]
    decided = iter(allot_each(left, limits, book, now_ms))
    return [
        Grant(ask.units, None) if verdicts[number] == WHOLE
        else Grant(0, Rejection.BUDGET_EXHAUSTED) if verdicts[number] == EXHAUSTED
        else next(decided)
        for ask, number in zip(asks, of, strict=True)
    ]  # fmt: skip


def _check_seeded(currencies: set[str], limits: Limits, book: Book) -> None:
    if unseeded := sorted(c for c in currencies if c in limits.budgets and book.paid(c) is None):
        raise UnseededBudgets(unseeded)


def _fits(cap: CapRule, tallies: list[Tally], book: Book, now_ms: int) -> bool:
    """Whether one user's tallies of one currency all fit under `cap` whatever the order of their payouts: their sum,
    beside the most the cap counted where any of them could meet it, is within it."""
    covered = [tally for tally in tallies if tally.side in cap.sides]
    if not covered:
        return True
    asked = sum(tally.units for tally in covered)
    user, currency = covered[0].user, covered[0].currency
    if cap.window == ALL_TIME:
        return sum(book.total(side, currency, user) for side in cap.sides) + asked <= cap.units
    if cap.window == CALENDAR_MONTH:
        by_month: dict[str, int] = {}
        for tally in covered:
            for month, units in tally.months().items():
                by_month[month] = by_month.get(month, 0) + units
        if any(month_end_of(month) + KEPT_MS <= now_ms for month in by_month):  # its counters are gone
            return False
        return all(
            sum(book.month(side, currency, user, month) for side in cap.sides) + units <= cap.units
            for month, units in by_month.items()
        )
    first, last = min(min(tally.times) for tally in covered), max(max(tally.times) for tally in covered)
    if first <= now_ms - KEPT_MS:
        return False
    if sum(book.total(side, currency, user) for side in cap.sides) + asked <= cap.units:
        return True  # all it ever counted holds at least any span's: no grant by time need be read
    lo, hi = first - cap.window_ms, last + cap.window_ms
    held = sum(units for side in cap.sides for _, units in book.history(side, currency, user, lo, hi))
    return held + asked <= cap.units


def rooms(ask: Ask, limits: Limits, book: Book, now_ms: int) -> list[Room]:
    """The room every rule over the ask's currency and side leaves."""
    found = []
    if (budget := limits.budgets.get(ask.currency)) is not None:
        found.append(total_room(budget, book.paid(ask.currency) or 0, Rejection.BUDGET_EXHAUSTED))
    for cap in limits.caps.get(ask.currency, ()):
        if ask.side in cap.sides:
            found.append(cap_room(cap, ask, book, now_ms))
    return found


def cap_room(cap: CapRule, ask: Ask, book: Book, now_ms: int) -> Room:
    if cap.window == ALL_TIME:
        used = sum(book.total(side, ask.currency, ask.user) for side in cap.sides)
        return total_room(cap.units, used, Rejection.CAP_EXCEEDED)
    if cap.window == CALENDAR_MONTH:
        if month_end_ms(ask.at_ms) + KEPT_MS <= now_ms:  # its month's counters are gone
            return Room(0, Rejection.CAP_EXCEEDED)
        month = calendar_month(ask.at_ms)
        used = sum(book.month(side, ask.currency, ask.user, month) for side in cap.sides)
        return total_room(cap.units, used, Rejection.CAP_EXCEEDED)
    if ask.at_ms <= now_ms - KEPT_MS:  # grants are kept history_ms (the longest window + KEPT_MS) past their time
        return Room(0, Rejection.CAP_EXCEEDED)
    lo, hi = ask.at_ms - cap.window_ms, ask.at_ms + cap.window_ms
    near = [grant for side in cap.sides for grant in book.history(side, ask.currency, ask.user, lo, hi)]
    return rolling_room(cap.units, cap.window_ms, ask.at_ms, near)


def grant(units: int, rooms: Sequence[Room]) -> Grant:
    """The part of a payout of `units` that every rule's room lets through. The least room cuts it; among equal
    rooms a budget is named before a cap (the project's own limit, whatever the user's)."""
    if not rooms:
        return Grant(units, None)
    least = min(rooms, key=lambda room: (room.units, room.rule != Rejection.BUDGET_EXHAUSTED))
    return Grant(units, None) if least.units >= units else Grant(least.units, least.rule)


def total_room(limit: int, used: int, rule: Rejection) -> Room:
    """A budget's, or a calendar-month or all-time cap's room: the limit less what it counted already (none once it
    counted as much: a limit lowered below its count)."""
    return Room(max(limit - used, 0), rule)


def rolling_room(cap: int, window_ms: int, at_ms: int, granted: Sequence[tuple[int, int]]) -> Room:
    """A rolling cap's room for a payout whose event happened at `at_ms`: `cap` less the most any window of
    `window_ms` holding `at_ms` holds already. `granted`: the user's grants under this cap as (event time, units),
    in any order; only those in (at − W, at + W) can share a window with the payout.

    A window is (e − W, e]; it holds t when e is in [t, t + W). Its sum only grows at a grant's time, so the most is
    reached at e = t or at the time of a grant in (t, t + W): each such window is summed with two pointers over the
    grants sorted by time."""
    near = sorted((t, a) for t, a in granted if at_ms - window_ms < t < at_ms + window_ms)
    ends = [at_ms, *(t for t, _ in near if t > at_ms)]
    most = total = start = stop = 0
    for end in ends:  # ascending: at_ms first, then the later grants' times in order
        while stop < len(near) and near[stop][0] <= end:
            total += near[stop][1]
            stop += 1
        while start < stop and near[start][0] <= end - window_ms:
            total -= near[start][1]
            start += 1
        most = max(most, total)
    return Room(max(cap - most, 0), Rejection.CAP_EXCEEDED)


def calendar_month(at_ms: int) -> str:
    """The UTC month an event time falls in (`2026-11`): the key of a calendar-month cap's counter."""
    return _month_of_day(at_ms // DAY_MS)[0]


def month_end_ms(at_ms: int) -> int:
    """The first millisecond after the UTC month of `at_ms`: its counters are kept KEPT_MS past it."""
    return _month_of_day(at_ms // DAY_MS)[1]


@lru_cache(maxsize=4096)
def month_end_of(month: str) -> int:
    """The first millisecond after a calendar month (`2026-11`)."""
    year, number = int(month[:4]), int(month[5:])
    return int(datetime(year + number // 12, number % 12 + 1, 1, tzinfo=UTC).timestamp() * 1000)


@lru_cache(maxsize=4096)
def _month_of_day(day: int) -> tuple[str, int]:
    """A UTC day's month and that month's end (ms), computed once per day (a per-payout hot path)."""
    month = datetime.fromtimestamp(day * DAY_MS / 1000, UTC).strftime("%Y-%m")
    return month, month_end_of(month)
