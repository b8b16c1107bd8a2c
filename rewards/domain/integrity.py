"""Program integrity (API.md §8): which of the payouts the engine computed the rules refuse, and why.

Pure: the blocklisted users and the same-person signals are read by the caller (the workers, per delivery) and given
here. A refused payout is not paid; it is kept as a rejected payout with its reason (movements show it).
"""

from collections.abc import Collection, Iterable, Mapping
from enum import StrEnum

from rewards.domain.errors import DomainError, ErrorKind
from rewards.domain.payouts import Payout, PayoutKind, User

BLOCKLISTED_MESSAGE = "User is blocklisted"


class UserBlocklisted(DomainError):
    """A code use by or of a blocklisted user (API.md §8)."""

    kind = ErrorKind.REFUSED

    def __init__(self, message: str = BLOCKLISTED_MESSAGE):
        super().__init__(message)


class Rejection(StrEnum):
    """Why a payout was refused: `payout_status_details` of a rejected movement."""

    BLOCKLISTED = "blocklisted"
    SELF_REFERRAL = "self_referral"
    CAP_EXCEEDED = "cap_exceeded"
    BUDGET_EXHAUSTED = "budget_exhausted"
    REJECTED_BY_OPERATOR = "rejected_by_operator"


# What a referrer earns from the users it referred: refused when the referred user is the referrer itself.
_AS_REFERRER = (PayoutKind.COMMISSION, PayoutKind.REFERRAL_REWARD)


def screen(
    payouts: list[Payout], source_user: User, blocklisted: Collection[User], same_person: Collection[User] = ()
) -> list[Rejection | None]:
    """Each of `payouts` (of one conversion or code use by `source_user`: the converting user, or the user who used the
    code) refused with its reason, or None when it is paid:

    - a blocklisted source user pays no one: every payout refused (`blocklisted`);
    - a blocklisted recipient earns nothing, in any role (the levels above it are still paid);
    - a referrer that is the source user itself by what the service can see (`same_person`: the caller's signals)
      earns nothing from it as a referrer (`self_referral`); the source user's own payouts are kept."""
    if source_user in blocklisted:
        return [Rejection.BLOCKLISTED] * len(payouts)
    return [_verdict(payout, blocklisted, same_person) for payout in payouts]


def _verdict(payout: Payout, blocklisted: Collection[User], same_person: Collection[User]) -> Rejection | None:
    if payout.recipient in blocklisted:
        return Rejection.BLOCKLISTED
    if payout.recipient in same_person and payout.role == "affiliate" and payout.kind in _AS_REFERRER:
        return Rejection.SELF_REFERRAL
    return None


def email_person(identifier: str) -> str:
    """The mailbox an email address reaches, as far as the service can tell: the local part without its `+tag`, in
    lowercase (`Alice+promo@Example.com` and `alice@example.com` are one person)."""
    local, _, domain = identifier.lower().rpartition("@")
    return f"{local.split('+', 1)[0]}@{domain}"


def same_by_email(a: User, b: User) -> bool:
    both = a.identifier_type == b.identifier_type == "email"
    return both and email_person(a.identifier) == email_person(b.identifier)


def self_referrers(user: User, referrers: Iterable[User], tracking_ids: Mapping[User, set[str]]) -> set[User]:
    """Those of `referrers` (the user's referrers at any level) that are the user itself by what the service can see:
    the same mailbox (same_by_email), or a browser tracking id bound to both through `connect_wallet`
    (`tracking_ids`: each user's, rewards.ports.TrackingStore.tracking_ids_of)."""
    own = tracking_ids.get(user, set())
    return {r for r in referrers if same_by_email(user, r) or (own and own & tracking_ids.get(r, set()))}
