"""Referral rules (API.md §2): who may use a code. Pure checks shared by every storage adapter."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from rewards.domain.codes import is_available, remaining_uses
from rewards.domain.errors import DomainError, ErrorKind
from rewards.domain.limits import LimitError, parse_amount
from rewards.domain.payouts import User
from schemas.records import ReferralRemovedRecord


class ReferralError(DomainError):
    pass


class CodeNotFound(ReferralError):
    kind = ErrorKind.NOT_FOUND


class CodeUnavailable(ReferralError):
    kind = ErrorKind.EXHAUSTED


class AlreadyReferred(ReferralError):
    kind = ErrorKind.CONFLICT


class InvalidReferral(ReferralError):
    kind = ErrorKind.INVALID


class MaxUsesBelowCurrent(ReferralError):
    kind = ErrorKind.INVALID


# The published client tells these apart by their exact message (docs/fuul-sdk-7.41.0-surface.md §1.6).
CODE_IN_USE = "Code in use"
ADDRESS_IN_USE = "Address in use"


class CodeInUse(ReferralError):
    """An affiliate code's name is a code of the project already, or was one (a renamed code keeps its names)."""

    kind = ErrorKind.CONFLICT

    def __init__(self, message: str = CODE_IN_USE):
        super().__init__(message)


class AddressInUse(ReferralError):
    """The user has an affiliate code already (one per user: updating renames it)."""

    kind = ErrorKind.CONFLICT

    def __init__(self, message: str = ADDRESS_IN_USE):
        super().__init__(message)


class AffiliateCodeNotFound(ReferralError):
    """The user has no affiliate code to update (or the code named is not the user's)."""

    kind = ErrorKind.NOT_FOUND


class ReferralNotFound(ReferralError):
    """The user is not referred, or not through the code and by the referrer named."""

    kind = ErrorKind.NOT_FOUND


@dataclass(frozen=True)
class CodeUse:
    identifier: str
    identifier_type: str
    used_at_ms: int


@dataclass(frozen=True)
class CodeRecord:
    code: str
    owner: User
    created_at_ms: int
    max_uses: int | None
    current_uses: int
    used_by: list[CodeUse] = field(default_factory=list)
    chosen: bool = False  # an affiliate code (API.md §7): chosen by its owner, not generated
    rebate_rate: Decimal | None = None  # the share of each level-1 commission through it paid to the referred user
    names: tuple[str, ...] = ()  # the names it had before (renamed): they are its own for good, and still find it
    updated_at_ms: int | None = None  # its last rename or rebate rate change (None: never changed)

    @property
    def all_names(self) -> tuple[str, ...]:
        """Every name the code has had: what the warehouse's rows of it (referrals, payouts, clicks) are under."""
        return (self.code, *self.names)

    @property
    def remaining_uses(self) -> int | None:
        return remaining_uses(self.max_uses, self.current_uses)

    @property
    def available(self) -> bool:
        return is_available(self.max_uses, self.current_uses)


@dataclass(frozen=True)
class CodeStats:
    """A code's figures from the warehouse (rewards.ports.CodeFigures): users referred through it, less those whose
    referral was removed; and what its owner earned through it, in points: the level-1 commissions on conversions of
    users it referred (less their rebates) and the owner's referral rewards of its uses."""

    total_users: int = 0
    earnings: Decimal = Decimal(0)


def max_uses_below_current(max_uses: int | None, current_uses: int) -> bool:
    """Whether a new limit is below the uses made (API.md §2: refused). 0 never is: it disables the code, used or not
    (the published client documents `max_uses: 0` as "disable code")."""
    return max_uses is not None and max_uses != 0 and max_uses < current_uses


def referral_removed_record(
    project_id: str, removal_id: str, use_id: str, code: str, referrer: User, user: User, referred_at_ms: int,
    removed_at_ms: int,
) -> ReferralRemovedRecord:  # fmt: skip
    return ReferralRemovedRecord(
        project_id=project_id, id=removal_id, use_id=use_id, code=code,
        referrer_identifier=referrer.identifier, referrer_identifier_type=referrer.identifier_type,
        user_identifier=user.identifier, user_identifier_type=user.identifier_type,
        referred_at_ms=referred_at_ms, removed_at_ms=removed_at_ms,
    )  # fmt: skip


def check_use(code: CodeRecord, user: User, user_referrer: User | None, owner_chain: list[User]) -> None:
    """Raise why `user` may not use `code`. `owner_chain` is every referrer above the owner."""
    if user == code.owner:
        raise InvalidReferral("You cannot use your own referral code")
    if user_referrer is not None:
        raise AlreadyReferred("User has already been referred")
    if user in owner_chain:
        raise InvalidReferral("Using this code would create a referral cycle")
    if not code.available:
        raise CodeUnavailable("Referral code has reached its maximum number of uses")


REBATE_RATE_RULE = "must be a number from 0 to 1"


def parse_rebate_rate(value: object) -> Decimal:
    """A rebate rate (API.md §7: 0 to 1, an exact decimal of at most 18 places) from a JSON number or string; raises
    LimitError. (The client's docs say 0 to 0.2 with 2 places: API.md, which allows 0 to 1, wins.)"""
    try:
        rate = parse_amount(value)
    except LimitError as exc:
        raise LimitError(f"{REBATE_RATE_RULE}: it {exc}") from exc
    if rate > 1:
        raise LimitError(REBATE_RATE_RULE)
    return rate


INT64_LIMIT = 2**63


def json_number(value: Decimal) -> int | Decimal:
    """A figure the published client declares a JSON number: an integer, else the exact decimal, which an answer writes
    digit for digit as a JSON number (rewards.web.numbers.ExactJSONResponse; a float would round it)."""
    if value == value.to_integral_value() and abs(value) < INT64_LIMIT:
        return int(value)
    return value  # a larger integer stays a Decimal too: orjson writes no integer past 64 bits


def code_figures_json(record: CodeRecord, clicks_by_name: Mapping[str, int], stats: Mapping[str, CodeStats]) -> dict:
    """The figures of a code the published client reads beside it (`UserReferralCode`, `AffiliateCodeWithStats`):
    its rebate rate, its clicks (pageviews naming any of its names), the users referred through it (less those whose
    referral was removed) and what its owner earned through it (points), all JSON numbers."""
    figures = stats.get(record.code, CodeStats())
    return {
        "rebate_rate": None if record.rebate_rate is None else json_number(record.rebate_rate),
        "clicks": sum(clicks_by_name.get(name, 0) for name in record.all_names),
        "total_users": figures.total_users,
        "total_earnings": json_number(figures.earnings),
    }
