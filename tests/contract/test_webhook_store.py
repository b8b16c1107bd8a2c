"""The WebhookStore contract (API.md §10): a project's endpoints, at most 20 (checked atomically), replaced only while
they exist. On SQLite and Redis, and with `-m cluster` on a Redis Cluster."""

import asyncio

import pytest

from rewards.domain.webhooks import MAX_ENDPOINTS, Endpoint, TooManyEndpoints
from rewards.ports import WebhookStore
from tests.contract.support import assert_implements


def test_has_the_port(store: WebhookStore):
    assert_implements(type(store), WebhookStore)


def endpoint(n: int) -> Endpoint:
    return Endpoint(f"wh_{n:03d}", f"https://93.184.216.34/{n}", ("reward.earned",), None, True, "plain:00", 1000 + n)


async def test_endpoints_are_kept_changed_and_deleted(store: WebhookStore, pid: str, other_pid: str):
    await store.create_webhook(pid, endpoint(2))
    await store.create_webhook(pid, endpoint(1))
    assert [e.id for e in await store.list_webhooks(pid)] == ["wh_001", "wh_002"]  # oldest first
    assert await store.list_webhooks(other_pid) == [] and await store.get_webhook(other_pid, "wh_001") is None
    changed = endpoint(1).with_changes(enabled=False, events=("reward.earned", "referral.created"))
    assert await store.put_webhook(pid, changed) is True
    assert await store.get_webhook(pid, "wh_001") == changed
    assert await store.delete_webhook(pid, "wh_001") is True and await store.delete_webhook(pid, "wh_001") is False
    assert await store.put_webhook(pid, changed) is False  # deleted: not made again


async def test_at_most_20_even_when_created_at_once(store: WebhookStore, pid: str):
    async def one(n: int) -> bool:
        try:
            await store.create_webhook(pid, endpoint(n))
            return True
        except TooManyEndpoints:
            return False

    made = await asyncio.gather(*(one(n) for n in range(MAX_ENDPOINTS + 5)))
    assert sum(made) == MAX_ENDPOINTS and len(await store.list_webhooks(pid)) == MAX_ENDPOINTS
    with pytest.raises(TooManyEndpoints):
        await store.create_webhook(pid, endpoint(99))
