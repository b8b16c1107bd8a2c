"""Referral rules (API.md §2): who may use a code. Pure checks shared by every storage adapter."""

from dataclasses import dataclass, field

from rewards.domain.codes import is_available, remaining_uses
from rewards.domain.errors import DomainError, ErrorKind
from rewards.domain.payouts import User


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

    @property
    def remaining_uses(self) -> int | None:
        return remaining_uses(self.max_uses, self.current_uses)

    @property
    def available(self) -> bool:
        return is_available(self.max_uses, self.current_uses)


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
