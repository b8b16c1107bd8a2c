"""Referral codes and the referral graph (API.md §2): the use cases, knowing nothing of HTTP.

Writes change the state store and publish their record inside its block (rewards.ports), so the workers
pay the referral rewards and the listing learns of new codes."""

from rewards.domain.payouts import User
from rewards.domain.referrals import CodeNotFound, CodeRecord
from rewards.ports import EventLog, Referral, ReferralStore


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


async def get_code(state: ReferralStore, project_id: str, code: str) -> CodeRecord:
    record = await state.get_code(project_id, code)
    if record is None:
        raise CodeNotFound("Referral code not found")
    return record


async def set_max_uses(state: ReferralStore, project_id: str, code: str, max_uses: int | None) -> CodeRecord:
    return await state.set_max_uses(project_id, code, max_uses)


async def use_code(
    state: ReferralStore, log: EventLog, project_id: str, code: str, user: User, proof: dict
) -> CodeRecord:
    """The code after `user` used it; its use is published so the workers pay the referral rewards."""
    async with state.use_code(project_id, code, user, proof) as used:
        await log.publish(project_id, used.payload)
    record, _ = used.value
    return record
