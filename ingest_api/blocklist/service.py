"""A project's blocklist (API.md §8): the use cases. What the blocklist does to payouts is the workers'
(rewards.domain.integrity); to code uses, ingest_api.referral_codes'."""

from rewards.domain.payouts import User
from rewards.domain.timestamps import format_timestamp
from rewards.ports import BlockedUser, IntegrityStore


async def block(state: IntegrityStore, project_id: str, user: User, reason: str | None) -> BlockedUser:
    return await state.block_user(project_id, user, reason)


async def unblock(state: IntegrityStore, project_id: str, user: User) -> bool:
    return await state.unblock_user(project_id, user)


async def page(state: IntegrityStore, project_id: str, offset: int, limit: int) -> tuple[list[BlockedUser], int]:
    return await state.blocklist_page(project_id, offset, limit)


def blocked_json(blocked: BlockedUser) -> dict:
    return {
        "user_identifier": blocked.user.identifier,
        "user_identifier_type": blocked.user.identifier_type,
        "reason": blocked.reason,
        "created_at": format_timestamp(blocked.created_ms),
    }
