"""Reversals (API.md §9: a refund, a chargeback, a cancelled order): the share of an event's payouts taken back, and
what it does to claim checks and debts. Pure and exact.

- A reversal names an event, a reason and a fraction, 0 < f ≤ 1 (at most 18 places, like every amount). An event's
  fractions never sum past 1; the same reversal sent again (same event, reason and fraction) counts once (`settle`).
- A payout of `amount` reversed from a share `before` to a share `after` of its event gives back
  ⌊amount × after⌋ − ⌊amount × before⌋ in its currency's smallest unit (10^-18 of a point, one raw unit of a token):
  never more than was paid, and all of it once the event is reversed whole, however the fractions were split
  (`taken_back`).
- What a token payout gives back comes out of its claim check while the check is open; a closed or claimed check
  keeps its amount and the rest becomes the recipient's debt in that currency, taken from its next payouts first
  (`from_check`, `against_debt`); an expired check's amount went back to the budget already: nothing to take."""

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import ROUND_FLOOR, Decimal
from typing import NamedTuple

from rewards.domain.amounts import EXACT, POINT_PLACES, format_amount
from rewards.domain.claim_checks import CLAIMED, CLOSED, EXPIRED, OPEN, PENDING_ACCEPTANCE, ClaimCheck
from rewards.domain.limits import LimitError, parse_amount
from rewards.domain.payouts import User
from schemas.records import ReversalRecord

ONE = Decimal(1)
MAX_REASON_LENGTH = 1000  # the contract names no bound; a reason is a note for people
# Reversals one event may have (the contract names no bound; 1,000 × 0.001 reverses it whole): what the state store
# remembers of an event stays small.
MAX_PER_EVENT = 1000
_POINT_UNIT = Decimal(1).scaleb(-POINT_PLACES)


class Reversal(NamedTuple):
    dedup_id: str
    reason: str
    fraction: Decimal

    def identity(self) -> str:
        """What makes two reversals the same one sent again: its event, reason and fraction (0.5 and 0.50 alike)."""
        return f"{self.dedup_id}\x1f{self.reason}\x1f{format_amount(self.fraction)}"

    def digest(self) -> str:
        """Its identity as the state store remembers it: 128 bits of its SHA-256 (a reason may be 1,000 characters)."""
        return hashlib.sha256(self.identity().encode()).hexdigest()[:32]


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


class TooMany(Exception):
    """An event that would have more than MAX_PER_EVENT reversals (409 naming it)."""

    def __init__(self, dedup_id: str):
        super().__init__(dedup_id)
        self.dedup_id = dedup_id


class Step(NamedTuple):
    reversal: Reversal
    before: Decimal  # its event's reversed share before it
    after: Decimal  # and after it


class Settled(NamedTuple):
    applied: list[Reversal]  # the reversals newly applied, in order (a repeat is not among them)
    shares: dict[str, tuple[Decimal, Decimal]]  # each event's reversed share (before, after) them
    steps: list[Step]  # each applied reversal with its event's share before and after it, in order


def settle(
    reversals: Sequence[Reversal],
    reversed_shares: Mapping[str, Decimal],
    seen: set[str],
    counts: Mapping[str, int] | None = None,
) -> Settled:
    """One request's reversals, all or nothing: those not `seen` before (digests; a repeat within the request
    counts once too) add their fractions to their events' `reversed_shares`; PastWhole names the first event whose
    share would pass 1, TooMany the first that would have more than MAX_PER_EVENT reversals (`counts`: how many each
    has), and nothing is applied then."""
    applied: list[Reversal] = []
    shares: dict[str, tuple[Decimal, Decimal]] = {}
    steps: list[Step] = []
    met, added = set(seen), dict(counts or {})
    for reversal in reversals:
        if (digest := reversal.digest()) in met:
            continue
        met.add(digest)
        added[reversal.dedup_id] = added.get(reversal.dedup_id, 0) + 1
        if added[reversal.dedup_id] > MAX_PER_EVENT:
            raise TooMany(reversal.dedup_id)
        before, now = shares.get(reversal.dedup_id) or (reversed_shares.get(reversal.dedup_id, Decimal(0)),) * 2
        after = EXACT.add(now, reversal.fraction)
        if after > ONE:
            raise PastWhole(reversal.dedup_id)
        shares[reversal.dedup_id] = (before, after)
        applied.append(reversal)
        steps.append(Step(reversal, now, after))
    return Settled(applied, shares, steps)


REVERSAL_PART = ":reversal:"


def reversing_payout_id(payout_id: str, reversal_id: str) -> str:
    """The id of a payout's reversing movement: the payout's, then the reversal's (the payout's is the part before
    REVERSAL_PART)."""
    return f"{payout_id}{REVERSAL_PART}{reversal_id}"


def share_text(share: Decimal) -> str:
    """A share (0 to 1, at most 18 places) as fixed-width text of its 10^-18 units: texts compare as the shares do,
    so a store keeps the greatest by comparing texts."""
    return f"{int(share.scaleb(POINT_PLACES, context=EXACT)):019d}"


def share_of(text: str) -> Decimal:
    return Decimal(int(text)).scaleb(-POINT_PLACES, context=EXACT)


def records(project_id: str, settled: Settled, ids: Sequence[str], reversed_at_ms: int) -> list[ReversalRecord]:
    """The records of the reversals a request applied, each with its id (from `ids`, in order)."""
    return [
        ReversalRecord(
            project_id=project_id,
            id=reversal_id,
            dedup_id=step.reversal.dedup_id,
            reason=step.reversal.reason,
            fraction=format_amount(step.reversal.fraction),
            reversed_before=format_amount(step.before),
            reversed_after=format_amount(step.after),
            reversed_at_ms=reversed_at_ms,
        )
        for step, reversal_id in zip(settled.steps, ids, strict=False)
    ]


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
    if status in (OPEN, PENDING_ACCEPTANCE):
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


class TakeBack(NamedTuple):
    """A token payout's part taken back by a reversal: out of its claim check `check_id`, or owed by its recipient."""

    check_id: str
    user: User
    currency: str  # the token's address, lowercase (rewards.domain.allotment.currency_key)
    units: int


class Owed(NamedTuple):
    """A new claim check's amount, from which its recipient's debt in its currency is taken first."""

    user: User
    currency: str
    units: int


DebtKey = tuple[User, str]  # a recipient and a token's address (lowercase)


def take_back(
    items: Sequence[TakeBack], checks: Mapping[str, ClaimCheck], debts: Mapping[DebtKey, int]
) -> tuple[dict[str, ClaimCheck], dict[DebtKey, int], list[int]]:
    """What `items` do, in order: each open check reduced (a new version), the rest owed. Returns the checks changed
    (by id), the debts changed (their new units) and each item's debt added. A check the store does not hold (never
    registered) cannot be reduced: all of it is owed."""
    changed: dict[str, ClaimCheck] = {}
    owed: dict[DebtKey, int] = {}
    added = []
    for item in items:
        check = changed.get(item.check_id) or checks.get(item.check_id)
        status, amount = (check.status, check.amount) if check is not None else (CLOSED, 0)
        part = from_check(status, amount, item.units)
        if part.check_reduced_by:  # one new version per call
            version = checks[item.check_id].version + 1
            changed[item.check_id] = replace(check, amount=amount - part.check_reduced_by, version=version)
        if part.debt:
            key = (item.user, item.currency)
            owed[key] = owed.get(key, debts.get(key, 0)) + part.debt
        added.append(part.debt)
    return changed, owed, added


def settle_debts(asks: Sequence[Owed], debts: Mapping[DebtKey, int]) -> tuple[dict[DebtKey, int], list[int]]:
    """New claim checks' amounts against their recipients' debts, in order: the debts changed (their units left) and
    what each check settles (its amount is the rest)."""
    left: dict[DebtKey, int] = {}
    settled = []
    for ask in asks:
        key = (ask.user, ask.currency)
        debt = left.get(key, debts.get(key, 0))
        if not debt:
            settled.append(0)
            continue
        _, rest = against_debt(ask.units, debt)
        left[key] = rest
        settled.append(debt - rest)
    return left, settled
