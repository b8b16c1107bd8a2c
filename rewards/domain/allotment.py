"""How much of a payout caps and budgets let through (API.md §8): the arithmetic, pure and exact.

Groundwork for caps and budgets, which the configuration does not accept yet (docs/api.md §8): the state store's
atomic step (SQLite's transaction, Redis's script) will read a payout's counters, ask `grant` what fits, and record
it. What is here is what both adapters must agree on to the smallest unit:

- a budget's room: its amount less everything paid in its currency;
- a cap's room over a calendar month or all time: its amount less what the user was granted there;
- a rolling cap's room at a payout's event time t, whatever the order in which events are processed: no window of
  its length that holds t may exceed the cap once the payout is granted, so the room is the cap less the most that
  any such window, (e − W, e] with e in [t, t + W), already holds (`rolling_room`);
- the grant: the payout, or the least room when smaller (never below 0), and the rule that cut it.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from rewards.domain.amounts import EXACT
from rewards.domain.integrity import Rejection

ZERO = Decimal(0)


@dataclass(frozen=True)
class Room:
    """What one rule still lets through, and the rejection that names it when it is what cuts a payout."""

    amount: Decimal
    rule: Rejection


@dataclass(frozen=True)
class Grant:
    amount: Decimal  # what is paid: the payout, or less
    rejection: Rejection | None  # why the rest is refused; None when nothing is


def grant(amount: Decimal, rooms: Sequence[Room]) -> Grant:
    """The part of a payout of `amount` that every rule's room lets through. The least room cuts it; among equal
    rooms a budget is named before a cap (the project's own limit, whatever the user's)."""
    if not rooms:
        return Grant(amount, None)
    least = min(rooms, key=lambda room: (room.amount, room.rule != Rejection.BUDGET_EXHAUSTED))
    if least.amount >= amount:
        return Grant(amount, None)
    return Grant(max(least.amount, ZERO), least.rule)


def total_room(limit: Decimal, used: Decimal, rule: Rejection) -> Room:
    """A budget's, or a calendar-month or all-time cap's room: the limit less what it counted already."""
    return Room(EXACT.subtract(limit, used), rule)


def rolling_room(cap: Decimal, window_ms: int, at_ms: int, granted: Sequence[tuple[int, Decimal]]) -> Room:
    """A rolling cap's room for a payout whose event happened at `at_ms`: `cap` less the most any window of
    `window_ms` holding `at_ms` holds already. `granted`: the user's grants under this cap as (event time, amount),
    in any order; only those in (at − W, at + W) can share a window with the payout.

    A window is (e − W, e]; it holds t when e is in [t, t + W). Its sum only grows at a grant's time, so the most is
    reached at e = t or at the time of a grant in (t, t + W): each such window is summed with two pointers over the
    grants sorted by time."""
    near = sorted((t, a) for t, a in granted if at_ms - window_ms < t < at_ms + window_ms)
    ends = [at_ms, *(t for t, _ in near if t > at_ms)]
    most, total, start, stop = ZERO, ZERO, 0, 0
    for end in ends:  # ascending: at_ms first, then the later grants' times in order
        while stop < len(near) and near[stop][0] <= end:
            total = EXACT.add(total, near[stop][1])
            stop += 1
        while start < stop and near[start][0] <= end - window_ms:
            total = EXACT.subtract(total, near[start][1])
            start += 1
        most = max(most, total)
    return Room(EXACT.subtract(cap, most), Rejection.CAP_EXCEEDED)


def calendar_month(at_ms: int) -> str:
    """The UTC month an event time falls in (`2026-11`): the key of a calendar-month cap's counter."""
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m")
