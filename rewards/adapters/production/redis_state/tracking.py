"""TrackingStore on Redis (API.md §7): keys with TTLs (see redis_keys)."""

import asyncio
import time
from collections.abc import Sequence
from contextlib import asynccontextmanager

from rewards.adapters.production.redis_keys import ProjectKeys, parse_user_field, user_field
from rewards.adapters.production.redis_state.base import RedisStateBase, _applied, _maybe_published, _ms, _try_undo
from rewards.domain.payouts import User


class RedisTrackingStore(RedisStateBase):
    """The production adapter of rewards.ports.TrackingStore."""

    @asynccontextmanager
    async def first_within(self, project_id: str, key: str, window_s: float):
        repeat = ProjectKeys(project_id).tracking_repeat(key)
        started = time.monotonic()

        def forget():
            # Ours while its TTL (counted from the SET, after `started`) has not run out: no other request could
            # have set it meanwhile (they found it and were repeats).
            return self._redis.delete(repeat) if time.monotonic() - started < window_s else asyncio.sleep(0, 0)

        first = await _applied(self._redis.set(repeat, "1", nx=True, px=_ms(window_s)), forget) is True
        try:
            yield first
        except BaseException as exc:
            if first and not _maybe_published(exc):
                await _try_undo(forget)
            raise

    async def bind_code(self, project_id: str, tracking_id: str, code: str, ttl_s: float) -> None:
        await self._redis.set(ProjectKeys(project_id).tracking_code(tracking_id), code, px=_ms(ttl_s))

    async def bind_user(self, project_id: str, tracking_id: str, user: User, ttl_s: float) -> str | None:
        k = ProjectKeys(project_id)
        async with self._redis.pipeline(transaction=False) as pipe:  # one slot: the project's
            pipe.set(k.tracking_user(tracking_id), user_field(user), px=_ms(ttl_s))
            pipe.get(k.tracking_code(tracking_id))
            _, code = await pipe.execute()
        # The other way round, every tracking id the user was bound to (API.md §8: two users, one browser).
        now = int(time.time() * 1000)
        await self._scripts.bind_tracking_id(keys=[k.tracking_ids(user)], args=[tracking_id, now + _ms(ttl_s), now])
        return code

    async def tracking_ids_of(self, project_id: str, users: Sequence[User]) -> dict[User, set[str]]:
        k, now = ProjectKeys(project_id), int(time.time() * 1000)
        wanted = list(dict.fromkeys(users))
        if not wanted:
            return {}
        async with self._redis.pipeline(transaction=False) as pipe:  # one slot: the project's
            for user in wanted:
                pipe.zrangebyscore(k.tracking_ids(user), f"({now}", "+inf")
            found = await pipe.execute()
        return {user: set(ids) for user, ids in zip(wanted, found, strict=True) if ids}

    async def tracked_user(self, project_id: str, tracking_id: str) -> User | None:
        value = await self._redis.get(ProjectKeys(project_id).tracking_user(tracking_id))
        return None if value is None else parse_user_field(value)
