"""Registering affiliates (API.md §4): the use case, knowing nothing of HTTP.

The registration is published on the event log, so the listing (query API) learns of it."""

from dataclasses import dataclass
from decimal import Decimal

from ingest_api.signatures import check_signed
from rewards.domain import signatures
from rewards.domain.affiliates import AffiliateExists, Figures, UnknownTier
from rewards.domain.amounts import format_amount
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.payouts import User
from rewards.domain.referrals import AffiliateCodeNotFound, CodeInUse, CodeRecord
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


# -- affiliate codes (API.md §7): the published client's createAffiliateCode, updateAffiliateCode, updateRebateRate --


@dataclass(frozen=True)
class AffiliateCode:
    """What the affiliate-code writes answer: the affiliate and its affiliate code."""

    affiliate: Affiliate
    code: CodeRecord

    @property
    def updated_at_ms(self) -> int:
        """The latest of the registration and the code's creation, rename or rebate rate change."""
        return max(self.affiliate.created_at_ms, self.code.updated_at_ms or self.code.created_at_ms)


async def create_affiliate_code(
    state: StateStore,
    log: EventLog,
    project_id: str,
    user: User,
    code: str,
    name: str | None,
    rebate_rate: Decimal | None,
    proof: dict,
) -> AffiliateCode:
    """Create `user`'s affiliate code, registering the user as an affiliate first if it is not one (API.md §4's
    defaults, `name` as its name). CodeInUse when any code of the project has or had the name, AddressInUse when
    the user has an affiliate code already (the store checks both again, atomically). With the project verifying
    signatures, `proof` must hold the user's signature of creating_code_message."""
    await check_signed(
        state, project_id, (user,), signatures.creating_code_message(project_id, code), proof.get("signature")
    )
    if await state.get_code(project_id, code) is not None:
        raise CodeInUse()
    affiliate = await state.get_affiliate(project_id, user)
    if affiliate is None:
        affiliate = Affiliate(
            id=user.identifier_type + ":" + user.identifier, user=user, created_at_ms=now_ms(), name=name,
            status="active", region=None, audience=None, tax_status="missing", tier=None,
        )  # fmt: skip
        async with state.create_affiliate(project_id, affiliate) as created:
            if created.value:
                await log.publish(project_id, created.payload)
        if not created.value:  # registered meanwhile by another request
            affiliate = await state.get_affiliate(project_id, user) or affiliate
    async with state.create_affiliate_code(project_id, user, code, rebate_rate, proof) as made:
        await log.publish(project_id, made.payload)
    return AffiliateCode(affiliate, made.value)


async def rename_affiliate_code(
    state: StateStore, log: EventLog, project_id: str, user: User, code: str, proof: dict
) -> AffiliateCode:
    """Give `user`'s affiliate code the name `code` (its figures, uses and referrals stay; its former names stay its
    own). AffiliateCodeNotFound when the user has none, CodeInUse when another code has or had the name. Signed as
    updating_code_message when the project verifies signatures."""
    await check_signed(
        state, project_id, (user,), signatures.updating_code_message(project_id, code), proof.get("signature")
    )
    async with state.rename_affiliate_code(project_id, user, code, proof) as renamed:
        if renamed.payload is not None:
            await log.publish(project_id, renamed.payload)
    affiliate = await state.get_affiliate(project_id, user)
    if affiliate is None:  # (a code is created with its owner's registration: not expected)
        raise AffiliateCodeNotFound("Affiliate not found")
    return AffiliateCode(affiliate, renamed.value)


async def set_rebate_rate(
    state: StateStore, project_id: str, user: User, code: str, rebate_rate: Decimal, proof: dict
) -> CodeRecord:
    """Set the rebate rate of `user`'s code `code`: conversions processed from now on split their level-1 commission
    through it (rewards.domain.payouts.with_rebate). AffiliateCodeNotFound when the code is not the user's. Signed as
    rebate_rate_message when the project verifies signatures."""
    message = signatures.rebate_rate_message(project_id, code, format_amount(rebate_rate))
    await check_signed(state, project_id, (user,), message, proof.get("signature"))
    return await state.set_rebate_rate(project_id, user, code, rebate_rate, proof)
