"""AffiliateStore on Redis. Until the undo of a change whose block raised (the package says why), concurrent readers
can see:

- create_affiliate: the affiliate (a concurrent registration of the same user gets False / 409).
"""

import json
from collections.abc import Sequence
from contextlib import asynccontextmanager
from dataclasses import replace

from rewards.adapters.production.redis_keys import ProjectKeys, user_field
from rewards.adapters.production.redis_state.base import RedisStateBase, _json, _new_entry
from rewards.domain.affiliates import affiliate_record, stored_affiliate, stored_attributes
from rewards.domain.payouts import User
from rewards.ports import Affiliate, Change
from schemas.records import dump_records


class RedisAffiliateStore(RedisStateBase):
    """The production adapter of rewards.ports.AffiliateStore."""

    @asynccontextmanager
    async def create_affiliate(self, project_id: str, affiliate: Affiliate):
        k, user = ProjectKeys(project_id), user_field(affiliate.user)
        document = _affiliate_json(affiliate)
        entry = replace(_new_entry(), payload=dump_records([affiliate_record(project_id, affiliate)]))
        undo = self._outbox_undo(k, entry, self._scripts.undo_affiliate, [k.affiliates()], [user, document])
        writing = (self._scripts.create_affiliate, [k.affiliates()], [user, document])
        if await self._outbox_write(k, entry, *writing, undo) == "exists":
            yield Change(False, None)
            return
        async with self._published(k, entry, undo, True) as change:
            yield change

    async def get_affiliate(self, project_id: str, user: User) -> Affiliate | None:
        return (await self.affiliates_among(project_id, [user])).get(user)

    async def affiliates_among(self, project_id: str, users: Sequence[User]) -> dict[User, Affiliate]:
        users = list(dict.fromkeys(users))
        if not users:
            return {}
        documents = await self._redis.hmget(ProjectKeys(project_id).affiliates(), [user_field(u) for u in users])
        return {u: _affiliate(u, d) for u, d in zip(users, documents, strict=True) if d is not None}


def _affiliate_json(a: Affiliate) -> str:
    return _json(stored_attributes(a))


def _affiliate(user: User, document: str) -> Affiliate:
    return stored_affiliate(user, json.loads(document))
