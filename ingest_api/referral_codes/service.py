"""Referral codes and the referral graph (API.md §2): the use cases, knowing nothing of HTTP.

Writes change the state store and publish their record inside its block (rewards.ports), so the workers
pay the referral rewards and the listing learns of new codes."""

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import structlog
from prometheus_client import Counter

from ingest_api.signatures import check_signed
from rewards.domain import integrity, signatures
from rewards.domain.integrity import UserBlocklisted
from rewards.domain.payouts import MAX_LEVELS, User
from rewards.domain.referrals import CodeNotFound, CodeRecord, code_figures_json
from rewards.ports import CodeFigures, CodeTrafficFigures, EventLog, Referral, ReferralStore, StateStore

logger = structlog.get_logger(__name__)
FIGURES_MISSING = Counter(
    "rewards_code_figures_unavailable_total", "Code answers given zero figures because the warehouse did not answer"
)


async def create_codes(
    state: ReferralStore, log: EventLog, project_id: str, owner: User, quantity: int, max_uses: int | None
) -> list[CodeRecord]:
    async with state.create_codes(project_id, owner, quantity, max_uses) as created:
        await log.publish(project_id, created.payload)
    return created.value


async def list_codes(
    state: ReferralStore, project_id: str, owner: User, offset: int, limit: int
) -> tuple[list[CodeRecord], int]:
    """A page of the owner's codes and how many it has; CodeNotFound when it has none."""
    records, count = await state.list_codes(project_id, owner, offset, limit)
    if count == 0:
        raise CodeNotFound("No referral codes found for this user")
    return records, count


async def referral_of(state: ReferralStore, project_id: str, user: User) -> Referral | None:
    return await state.referral_of(project_id, user)


async def self_referred(state: StateStore, project_id: str, user: User) -> bool:
    """Whether the user is one of its referrers, at any level, by what the service can see (API.md §8): such a
    referral is flagged, and those referrers earn nothing from the user."""
    chain = (await state.referrer_chains(project_id, [user], MAX_LEVELS)).get(user, [])
    if not chain:
        return False
    tracking = await state.tracking_ids_of(project_id, [user, *chain])
    return bool(integrity.self_referrers(user, chain, tracking))


async def get_code(state: ReferralStore, project_id: str, code: str) -> CodeRecord:
    record = await state.get_code(project_id, code)
    if record is None:
        raise CodeNotFound("Referral code not found")
    return record


async def set_max_uses(state: ReferralStore, project_id: str, code: str, max_uses: int | None) -> CodeRecord:
    return await state.set_max_uses(project_id, code, max_uses)


async def use_code(state: StateStore, log: EventLog, project_id: str, code: str, user: User, proof: dict) -> CodeRecord:
    """The code after `user` used it; its use is published so the workers pay the referral rewards. With the project
    verifying signatures, `proof` must hold the user's signature of using_code_message."""
    expected = signatures.using_code_message(project_id, code)
    await check_signed(state, project_id, (user,), expected, proof.get("signature"), proof.get("signature_message"))
    owner = (await get_code(state, project_id, code)).owner
    if await state.blocklisted_among(project_id, [user, owner]):
        raise UserBlocklisted()  # API.md §8: after the code's 404, before everything else a use checks
    async with state.use_code(project_id, code, user, proof) as used:
        await log.publish(project_id, used.payload)
    record, _ = used.value
    return record


async def figures_of(
    traffic: CodeTrafficFigures | None, figures: CodeFigures | None, project_id: str, records: Sequence[CodeRecord]
) -> dict[str, dict]:
    """Each code's figures as its answer shows them (rewards.domain.referrals.code_figures_json), by code: clicks
    from the tracking events' views, referred users and earnings from the warehouse's code_stats."""
    if not records:
        return {}
    clicks: dict[str, int] = {}
    stats: dict = {}
    try:
        if traffic is not None:
            names = [name for record in records for name in record.all_names]
            clicks = {name: found.clicks for name, found in (await traffic.of_codes(project_id, names)).items()}
        if figures is not None:
            stats = await figures.of_codes(project_id, records)
    except Exception as exc:
        # The figures decorate the answer of a write already made (a use, a limit) or of a state-store read: a
        # warehouse that does not answer must not turn them into a 503 ("nothing changed, retry") or a failure.
        FIGURES_MISSING.inc()
        logger.warning("code figures unavailable; answered zeros", project_id=project_id, error=str(exc))
        clicks, stats = {}, {}
    return {record.code: code_figures_json(record, clicks, stats) for record in records}


async def remove_referral(
    state: StateStore, log: EventLog, project_id: str, code: str, user: User, referrer: User, proof: dict
) -> Referral:
    """Remove `user`'s referral by `referrer` through `code` (API.md §7 deleteReferral): the user may be referred again;
    what was paid stays. Published, so the warehouse counts it out of the referred users from then on. With the
    project verifying signatures, `proof` must hold the user's or the referrer's signature of
    removing_referral_message."""
    expected = signatures.removing_referral_message(project_id, user, code)
    signed = proof.get("signature"), proof.get("signature_message")
    await check_signed(state, project_id, (user, referrer), expected, *signed)
    async with state.remove_referral(project_id, user, code, referrer) as removed:
        await log.publish(project_id, removed.payload)
    return removed.value


@dataclass(frozen=True)
class UserReferrer:
    """A user's level-1 referrer (API.md §7 getUserReferrer): none (every field None) or who, through which code."""

    referral: Referral | None = None
    name: str | None = None  # the referrer's name as an affiliate (API.md §4)
    codes: tuple[str, ...] = ()  # every code of the referrer, oldest first
    rebate_rate: Decimal | None = None  # the rebate rate of the code that referred the user


async def referrer_of(state: StateStore, project_id: str, user: User) -> UserReferrer:
    referral = await state.referral_of(project_id, user)
    if referral is None:
        return UserReferrer()
    referrer = referral.referrer
    affiliate = await state.get_affiliate(project_id, referrer)
    codes = (await state.codes_of(project_id, [referrer])).get(referrer, [])
    rates = await state.rebate_rates(project_id, [referral.code])
    name = None if affiliate is None else affiliate.name
    return UserReferrer(referral, name, tuple(reversed(codes)), rates.get(referral.code))
