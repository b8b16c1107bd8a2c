"""Affiliate rules (API.md §4)."""

from rewards.domain.errors import DomainError, ErrorKind


class AffiliateExists(DomainError):
    """The user is an affiliate already."""

    kind = ErrorKind.CONFLICT


class UnknownTier(DomainError):
    """The tier named is not a tier of the project's payout configuration."""

    kind = ErrorKind.INVALID
