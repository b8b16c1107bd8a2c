"""Affiliates (API.md §4): the affiliate object, its figures and its rules, shared by its registration (ingest), its
listing (query) and the state stores (which keep it, and publish its record with their change: rewards.ports.Change)."""

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from rewards.domain.amounts import exact_sum, format_amount
from rewards.domain.errors import DomainError, ErrorKind
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.payouts import MAX_LEVELS, User
from rewards.domain.referrals import CodeRecord
from rewards.domain.timestamps import format_timestamp
from schemas.entities import AFFILIATE
from schemas.records import AffiliateRecord, CodesCreatedRecord

LEVELS = range(1, MAX_LEVELS + 1)


# An affiliate: a frozen dataclass of the fields schemas.entities.AFFILIATE declares (in their order), but the
# project's, its user's two as one User.
Affiliate = AFFILIATE.object_class("Affiliate", User, __name__)


@dataclass(frozen=True)
class Figures:
    volumes: tuple[Decimal, ...]  # r1..r4
    earnings: Decimal
    referred_users: int

    @property
    def total_volume(self) -> Decimal:
        return exact_sum(self.volumes)


NO_FIGURES = Figures((Decimal(0),) * MAX_LEVELS, Decimal(0), 0)


def figures_from_row(row: dict) -> Figures:
    """Figures from a row with r1_volume..r4_volume, earnings (decimal text) and referred_users."""
    volumes = tuple(Decimal(row[f"r{n}_volume"]) for n in LEVELS)
    return Figures(volumes, Decimal(row["earnings"]), int(row["referred_users"]))


def affiliate_json(affiliate: Affiliate, config: PayoutConfig, codes: list[str], figures: Figures) -> dict:
    tier = config.effective_tier(affiliate.tier)
    return {
        **AFFILIATE.answer(AFFILIATE.values_of(affiliate), format_timestamp),
        "tier": None if tier is None else {"id": tier.id, "name": tier.name, "rank": tier.rank},
        "codes": codes,
        "referred_users": figures.referred_users,
        "total_volume": format_amount(figures.total_volume),
        **{f"r{n}_volume": format_amount(figures.volumes[n - 1]) for n in LEVELS},
        "total_earnings": format_amount(figures.earnings),
        # Rates are JSON numbers in the contract; a rate is a short decimal, exact enough as a float.
        **{f"r{n}": float(tier.rates.at_level(n)) if tier else 0.0 for n in LEVELS},
    }


def affiliate_record(project_id: str, affiliate: Affiliate) -> AffiliateRecord:
    return AffiliateRecord.model_validate({"project_id": project_id, **AFFILIATE.values_of(affiliate)})


# What a state store keeps of an affiliate, under its user: all its attributes but the user.
STORED_ATTRIBUTES = tuple(name for name in AFFILIATE.attributes(User) if name != "user")
_DEFAULTS = AFFILIATE.defaults


def stored_attributes(affiliate: Affiliate) -> dict:
    return {name: getattr(affiliate, name) for name in STORED_ATTRIBUTES}


def stored_affiliate(user: User, stored: Mapping) -> Affiliate:
    """The affiliate of `user` from its stored attributes (other keys ignored): an attribute declared since it was
    stored takes its default."""
    values = {**_DEFAULTS, **stored}
    return Affiliate(user=user, **{name: values[name] for name in STORED_ATTRIBUTES})


def codes_created_record(project_id: str, owner: User, codes: list[CodeRecord]) -> CodesCreatedRecord:
    return CodesCreatedRecord(
        project_id=project_id,
        codes=[c.code for c in codes],
        owner_identifier=owner.identifier,
        owner_identifier_type=owner.identifier_type,
        created_at_ms=codes[0].created_at_ms,
    )


class AffiliateExists(DomainError):
    """The user is an affiliate already."""

    kind = ErrorKind.CONFLICT


class UnknownTier(DomainError):
    """The tier named is not a tier of the project's payout configuration."""

    kind = ErrorKind.INVALID
