"""The base of domain errors: each rule broken carries its kind, what went wrong in domain terms. The HTTP layer
maps kinds to statuses in one place (rewards.web.handlers); the domain and the adapters know nothing of HTTP."""

from enum import Enum


class ErrorKind(Enum):
    INVALID = "invalid"  # the request breaks a rule whatever the state (a user's own code, a referral cycle)
    NOT_FOUND = "not_found"  # what it names does not exist (or is not the caller's)
    CONFLICT = "conflict"  # it clashes with what is already there (already referred, a check already claimed)
    EXHAUSTED = "exhausted"  # what it would use is used up (a code at its maximum number of uses)
    REFUSED = "refused"  # the rules refuse it to whoever asks (a blocklisted user's code use)


class DomainError(Exception):
    kind = ErrorKind.INVALID


class IdempotencyKeyReused(DomainError):
    """An Idempotency-Key sent again with another body than the first time."""

    kind = ErrorKind.CONFLICT
