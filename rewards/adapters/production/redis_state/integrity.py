"""IntegrityStore on Redis: the blocklist, a hash of reasons beside a sorted set of times (see redis_keys)."""

import json
from collections.abc import Sequence

from rewards.adapters.production.redis_keys import ProjectKeys, parse_user_field, user_field
from rewards.adapters.production.redis_state.base import RedisStateBase
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.ports import BlockedUser

# Users asked per HMGET: a delivery's users are a few thousand at most, a command of this many fields stays small.
_CHUNK = 1000


class RedisIntegrityStore(RedisStateBase):
    """The production adapter of rewards.ports.IntegrityStore."""

    def _keys(self, project_id: str) -> list[str]:
        k = ProjectKeys(project_id)
        return [k.blocklist(), k.blocklist_by_time()]

    async def block_user(self, project_id: str, user: User, reason: str | None) -> BlockedUser:
        args = [user_field(user), json.dumps(reason), now_ms()]
        created = await self._scripts.block_user(keys=self._keys(project_id), args=args)
        return BlockedUser(user, reason, int(float(created)))

    async def unblock_user(self, project_id: str, user: User) -> bool:
        return await self._scripts.unblock_user(keys=self._keys(project_id), args=[user_field(user)]) == 1

    async def blocklist_page(self, project_id: str, offset: int, limit: int) -> tuple[list[BlockedUser], int]:
        found = await self._scripts.blocklist_page(keys=self._keys(project_id), args=[offset, limit])
        total, flat = int(found[0]), found[1:]
        page = [
            BlockedUser(parse_user_field(flat[i]), json.loads(flat[i + 2]), int(float(flat[i + 1])))
            for i in range(0, len(flat), 3)
        ]
        return page, total

    async def blocklisted_among(self, project_id: str, users: Sequence[User]) -> set[User]:
        wanted = list(dict.fromkeys(users))
        key, found = ProjectKeys(project_id).blocklist(), set()
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            reasons = await self._redis.hmget(key, [user_field(user) for user in chunk])
            found.update(user for user, reason in zip(chunk, reasons, strict=True) if reason is not None)
        return found
