"""The IntegrityStore contract: a project's blocklist (API.md §8). On SQLite and Redis, and with `-m cluster` on a
Redis Cluster."""

import asyncio

from rewards.domain.payouts import User
from rewards.ports import IntegrityStore
from tests.contract.support import assert_implements, user


def test_has_the_port(store: IntegrityStore):
    assert_implements(type(store), IntegrityStore)


async def test_block_read_and_unblock(store: IntegrityStore, pid: str, other_pid: str):
    alice, bob, carol = user(1), user(2), user(3)
    assert await store.blocklisted_among(pid, [alice, bob]) == set()
    first = await store.block_user(pid, alice, "fraud ring")
    assert (first.user, first.reason) == (alice, "fraud ring") and first.created_ms > 0
    await asyncio.sleep(0.01)
    await store.block_user(pid, bob, None)
    assert await store.blocklisted_among(pid, [alice, bob, carol, alice]) == {alice, bob}
    assert await store.blocklisted_among(other_pid, [alice, bob]) == set()  # nothing crosses projects

    again = await store.block_user(pid, alice, 'quotes "and" \\ backslashes, é')  # idempotent: time kept
    assert (again.reason, again.created_ms) == ('quotes "and" \\ backslashes, é', first.created_ms)
    page, total = await store.blocklist_page(pid, 0, 10)
    assert total == 2 and [(b.user, b.reason) for b in page] == [
        (bob, None), (alice, 'quotes "and" \\ backslashes, é')
    ]  # the latest blocked first  # fmt: skip
    assert page[1].created_ms == first.created_ms
    assert [b.user for b in (await store.blocklist_page(pid, 1, 10))[0]] == [alice]
    assert (await store.blocklist_page(pid, 2, 10)) == ([], 2)

    assert await store.unblock_user(pid, alice) is True
    assert await store.unblock_user(pid, alice) is False
    assert await store.blocklisted_among(pid, [alice, bob]) == {bob}
    assert (await store.blocklist_page(pid, 0, 10))[1] == 1


async def test_many_users_are_looked_up_at_once(store: IntegrityStore, pid: str):
    users = [user(n) for n in range(1, 2501)]
    for blocked in users[::500]:
        await store.block_user(pid, blocked, None)
    assert await store.blocklisted_among(pid, users) == set(users[::500])
    assert await store.blocklisted_among(pid, []) == set()


async def test_users_blocked_in_one_millisecond_page_alike_on_every_adapter(
    store: IntegrityStore, pid: str, monkeypatch
):
    """Ties of time in one order, whatever the adapter (the latest blocked first, then by user, descending)."""
    from rewards.adapters.embedded.sqlite_state import integrity as sqlite_integrity
    from rewards.adapters.production.redis_state import integrity as redis_integrity

    for module in (sqlite_integrity, redis_integrity):
        monkeypatch.setattr(module, "now_ms", lambda: 1_790_000_000_000)
    users = [user(3), user(1), User("b@example.com", "email"), user(2), User("a@example.com", "email")]
    for blocked in users:
        await store.block_user(pid, blocked, None)
    page, _ = await store.blocklist_page(pid, 0, 10)
    expected = sorted(users, key=lambda u: f"{u.identifier_type}:{u.identifier}", reverse=True)
    assert [b.user for b in page] == expected
    assert [b.user for b in (await store.blocklist_page(pid, 2, 2))[0]] == expected[2:4]
