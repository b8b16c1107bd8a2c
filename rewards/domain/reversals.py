"""Reversals (API.md §9: a refund, a chargeback, a cancelled order): the share of an event's payouts taken back, and
what it does to claim checks and debts. Pure and exact; not wired to an endpoint yet (issue 30).

- A reversal names an event, a reason and a fraction, 0 < f ≤ 1 (at most 18 places, like every amount). An event's
  fractions never sum past 1; the same reversal sent again (same event, reason and fraction) counts once (`settle`).
- A payout of `amount` reversed from a share `before` to a share `after` of its event gives back
  ⌊amount × after⌋ − ⌊amount × before⌋ in its currency's smallest unit (10^-18 of a point, one raw unit of a token):
  never more than was paid, and all of it once the event is reversed whole, however the fractions were split
  (`taken_back`).
- What a token payout gives back comes out of its claim check while the check is open; a closed or claimed check
  keeps its amount and the rest becomes the recipient's debt in that currency, taken from its next payouts first
  (`from_check`, `against_debt`); an expired check's amount went back to the budget already: nothing to take."""

from collections.abc import Mapping, Sequence
from decimal import ROUND_FLOOR, Decimal
from typing import NamedTuple

from rewards.domain.amounts import EXACT, POINT_PLACES, format_amount
from rewards.domain.claim_checks import CLAIMED, CLOSED, EXPIRED, OPEN
from rewards.domain.limits import LimitError, parse_amount

ONE = Decimal(1)
MAX_REASON_LENGTH = 1000  # the contract names no bound; a reason is a note for people
_POINT_UNIT = Decimal(1).scaleb(-POINT_PLACES)


class Reversal(NamedTuple):
    dedup_id: str
    reason: str
    fraction: Decimal

    def identity(self) -> str:
        """What makes two reversals the same one sent again: its event, reason and fraction (0.5 and 0.50 alike)."""
        return f"{self.dedup_id}\x1f{self.reason}\x1f{format_amount(self.fraction)}"


def parse_fraction(value: object) -> Decimal:
    """A reversal's `fraction`: a decimal with 0 < f ≤ 1, or LimitError saying why."""
    fraction = parse_amount(value)
    if not 0 < fraction <= ONE:
        raise LimitError("must be above 0 and at most 1")
    return fraction


def parse_reason(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LimitError("must be a non-empty string")
    if len(value) > MAX_REASON_LENGTH:
        raise LimitError(f"must be at most {MAX_REASON_LENGTH} characters")
    return value


class PastWhole(Exception):
    """An event whose reversals would sum past 1 (API.md §9: 409 naming it)."""

    def __init__(self, dedup_id: str):
        super().__init__(dedup_id)
        self.dedup_id = dedup_id


class Settled(NamedTuple):
    applied: list[Reversal]  # the reversals newly applied, in order (a repeat is not among them)
    shares: dict[str, tuple[Decimal, Decimal]]  # each event's reversed share (before, after) them


def settle(reversals: Sequence[Reversal], reversed_shares: Mapping[str, Decimal], seen: set[str]) -> Settled:
    """One request's reversals, all or nothing: those not `seen` before (identities; a repeat within the request
    counts once too) add their fractions to their events' `reversed_shares`; PastWhole names the first event whose
    share would pass 1 (nothing is applied then)."""
    applied: list[Reversal] = []
    shares: dict[str, tuple[Decimal, Decimal]] = {}
    met = set(seen)
    for reversal in reversals:
        if (identity := reversal.identity()) in met:
            continue
        met.add(identity)
        before, after = shares.get(reversal.dedup_id) or (reversed_shares.get(reversal.dedup_id, Decimal(0)),) * 2
        after = EXACT.add(after, reversal.fraction)
        if after > ONE:
            raise PastWhole(reversal.dedup_id)
        shares[reversal.dedup_id] = (before, after)
        applied.append(reversal)
    return Settled(applied, shares)


def taken_back(amount: Decimal, before: Decimal, after: Decimal, is_points: bool) -> Decimal:
    """What a payout of `amount` gives back as its event's reversed share goes from `before` to `after`: the floor of
    its share after less the floor of its share before, in the currency's smallest unit."""
    unit = _POINT_UNIT if is_points else ONE
    return EXACT.subtract(_floor(EXACT.multiply(amount, after), unit), _floor(EXACT.multiply(amount, before), unit))


def _floor(value: Decimal, unit: Decimal) -> Decimal:
    return value.quantize(unit, rounding=ROUND_FLOOR, context=EXACT)


class FromCheck(NamedTuple):
    check_reduced_by: int  # raw units out of the claim check's amount
    debt: int  # raw units owed by the recipient in the check's currency


def from_check(status: str, check_amount: int, owed: int) -> FromCheck:
    """Where a token payout's given-back units come from, by its claim check's state."""
    if status == OPEN:
        reduced = min(owed, check_amount)
        return FromCheck(reduced, owed - reduced)
    if status in (CLOSED, CLAIMED):
        return FromCheck(0, owed)
    if status == EXPIRED:
        return FromCheck(0, 0)
    raise ValueError(f"unknown claim check state {status!r}")


def against_debt(units: int, debt: int) -> tuple[int, int]:
    """A new payout of `units` to a recipient owing `debt` in its currency: (what is paid, the debt left)."""
    settled = min(units, debt)
    return units - settled, debt - settled
