"""WebhookStore on Redis: the project's endpoints in one hash (id → JSON, the secret sealed inside); creating one
checks the bound and adds it in one script."""

import json

from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_state.base import RedisStateBase, _json
from rewards.domain import webhooks
from rewards.domain.webhooks import MAX_ENDPOINTS, Endpoint, TooManyEndpoints


class RedisWebhookStore(RedisStateBase):
    async def create_webhook(self, project_id: str, endpoint: Endpoint) -> None:
        document = _json(webhooks.to_json(endpoint))
        keys, args = [ProjectKeys(project_id).webhooks()], [endpoint.id, document, MAX_ENDPOINTS]
        if await self._scripts.create_webhook(keys=keys, args=args) != 1:
            raise TooManyEndpoints()

    async def list_webhooks(self, project_id: str) -> list[Endpoint]:
        found = await self._redis.hgetall(ProjectKeys(project_id).webhooks())
        endpoints = [webhooks.from_json(json.loads(text)) for text in found.values()]
        return sorted(endpoints, key=lambda endpoint: (endpoint.created_ms, endpoint.id))

    async def get_webhook(self, project_id: str, endpoint_id: str) -> Endpoint | None:
        text = await self._redis.hget(ProjectKeys(project_id).webhooks(), endpoint_id)
        return None if text is None else webhooks.from_json(json.loads(text))

    async def put_webhook(self, project_id: str, endpoint: Endpoint) -> bool:
        keys, args = [ProjectKeys(project_id).webhooks()], [endpoint.id, _json(webhooks.to_json(endpoint))]
        return await self._scripts.put_webhook(keys=keys, args=args) == 1

    async def delete_webhook(self, project_id: str, endpoint_id: str) -> bool:
        return await self._redis.hdel(ProjectKeys(project_id).webhooks(), endpoint_id) == 1
