"""The affiliate object of API.md §4, shared by its registration (ingest) and its listing (query), and the
records the listing is built from (written by both state stores with their change, see rewards.ports.Change)."""

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from rewards.domain.amounts import exact_sum, format_amount
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.payouts import MAX_LEVELS, User
from rewards.domain.referrals import CodeRecord
from rewards.domain.timestamps import format_timestamp
from rewards.ports import Affiliate, Warehouse
from schemas.entities import AFFILIATE
from schemas.records import AffiliateRecord, CodesCreatedRecord

LEVELS = range(1, MAX_LEVELS + 1)


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


async def all_time_figures(warehouse: Warehouse, project_id: str, user: User) -> Figures:
    """A user's figures so far: a user may have referred and earned before registering as an affiliate."""
    volumes = ", ".join(f"toString(sum(r{n}_volume)) AS r{n}_volume" for n in LEVELS)
    rows = await warehouse.query(
        f"SELECT {volumes}, toString(sum(earnings)) AS earnings, sum(referred_users) AS referred_users "
        "FROM affiliate_stats WHERE project_id = {project:String} "
        "AND user_key = reinterpretAsUInt128(sipHash128({type:String}, {id:String}))",
        {"project": project_id, "type": user.identifier_type, "id": user.identifier},
    )
    return figures_from_row(rows[0]) if rows else NO_FIGURES


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
