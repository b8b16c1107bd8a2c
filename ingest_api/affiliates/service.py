"""Registering affiliates (API.md §4): the use case, knowing nothing of HTTP.

The registration is published on the event log, so the listing (query API) learns of it."""

from dataclasses import dataclass

from rewards.domain.affiliates import AffiliateExists, Figures, UnknownTier
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import Affiliate, AffiliateFigures, EventLog, StateStore


@dataclass(frozen=True)
class Registration:
    """What a registration answers: the affiliate, with what its JSON shows beside it."""

    affiliate: Affiliate
    config: PayoutConfig
    codes: list[str]
    figures: Figures


async def register(
    state: StateStore, log: EventLog, figures: AffiliateFigures, project_id: str, user: User, **fields
) -> Registration:
    """Register `user` with `fields` (name, status, region, audience, tax_status, tier); AffiliateExists when it is
    one already, UnknownTier when its tier is not one of the project's configuration."""
    config = await state.get_config(project_id)
    tier = fields.get("tier")
    if tier is not None and config.tier(tier) is None:
        raise UnknownTier(f"tier {tier!r} is not a tier of the project configuration")
    affiliate = Affiliate(id=user.identifier_type + ":" + user.identifier, user=user, created_at_ms=now_ms(), **fields)
    async with state.create_affiliate(project_id, affiliate) as created:
        if not created.value:
            raise AffiliateExists("Affiliate already exists")
        await log.publish(project_id, created.payload)
    codes = (await state.codes_of(project_id, [user])).get(user, [])
    # A user may have referred and earned before registering: its figures so far.
    return Registration(affiliate, config, codes, await figures.all_time(project_id, user))
