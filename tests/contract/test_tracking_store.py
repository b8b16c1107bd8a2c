"""The TrackingStore contract: what tracking events remember (API.md §7), each for the time it is given: exact
repeats, and each tracking id's referral code and user. On SQLite and Redis, and with `-m cluster` on a Redis
Cluster."""

import asyncio

import pytest

from rewards.ports import TrackingStore
from tests.contract.support import Boom, assert_implements, user

LONG = 60.0  # a window that does not run out during a test
SHORT = 0.3  # one that does, after a pause of PAST
PAST = 0.5


class MaybePublished(Exception):
    """A publication whose outcome the log cannot tell (kafka_log.PublishFailed): it may have gone through."""

    maybe_published = True


async def first(store: TrackingStore, pid: str, key: str, window_s: float = LONG) -> bool:
    async with store.first_within(pid, key, window_s) as recorded:
        return recorded


def test_has_the_port(store: TrackingStore):
    assert_implements(type(store), TrackingStore)


async def test_a_key_is_first_once_within_its_window(store: TrackingStore, pid: str, other_pid: str):
    assert await first(store, pid, "k1") is True
    assert await first(store, pid, "k1") is False
    assert await first(store, pid, "k2") is True
    assert await first(store, other_pid, "k1") is True  # nothing crosses projects
    assert await first(store, pid, "k3", SHORT) is True
    assert await first(store, pid, "k3", SHORT) is False
    await asyncio.sleep(PAST)
    assert await first(store, pid, "k3", SHORT) is True  # the window ran out: first again


async def test_a_key_is_forgotten_when_its_block_raises(store: TrackingStore, pid: str):
    with pytest.raises(Boom):
        async with store.first_within(pid, "k", LONG) as recorded:
            assert recorded is True
            raise Boom
    assert await first(store, pid, "k") is True  # nothing was published: not a repeat
    with pytest.raises(Boom):
        async with store.first_within(pid, "k", LONG) as recorded:
            assert recorded is False
            raise Boom
    assert await first(store, pid, "k") is False  # a repeat's failure forgets nothing of the first
    with pytest.raises(MaybePublished):
        async with store.first_within(pid, "m", LONG):
            raise MaybePublished
    assert await first(store, pid, "m") is False  # it may be on the log: kept


async def test_a_tracking_id_binds_a_code_then_a_user(store: TrackingStore, pid: str, other_pid: str):
    assert await store.tracked_user(pid, "t1") is None
    assert await store.bind_user(pid, "t1", user(1), LONG) is None  # no code: arrived by itself
    assert await store.tracked_user(pid, "t1") == user(1)

    await store.bind_code(pid, "t2", "ABC1234", LONG)
    await store.bind_code(pid, "t2", "XYZ9876", LONG)  # the last code named wins
    assert await store.tracked_user(pid, "t2") is None
    assert await store.bind_user(pid, "t2", user(2), LONG) == "XYZ9876"
    assert await store.bind_user(pid, "t2", user(3), LONG) == "XYZ9876"  # the binding stays for later users
    assert await store.tracked_user(pid, "t2") == user(3)  # the last user wins

    assert await store.tracked_user(other_pid, "t2") is None  # nothing crosses projects
    assert await store.bind_user(other_pid, "t2", user(2), LONG) is None
    assert await store.tracked_user(pid, "t1") == user(1)


async def test_bindings_end_with_their_window(store: TrackingStore, pid: str):
    await store.bind_code(pid, "t", "ABC1234", SHORT)
    await store.bind_user(pid, "u", user(1), SHORT)
    await asyncio.sleep(PAST)
    assert await store.tracked_user(pid, "u") is None
    assert await store.bind_user(pid, "t", user(2), SHORT) is None
    await store.bind_code(pid, "t", "ABC1234", LONG)  # named again: bound again
    assert await store.bind_user(pid, "t", user(2), LONG) == "ABC1234"


async def test_a_users_tracking_ids_are_every_binding_not_expired(store: TrackingStore, pid: str, other_pid: str):
    """API.md §8's self-referral signal: a tracking id bound to two users (one browser, two wallets) is each's."""
    assert await store.tracking_ids_of(pid, [user(1)]) == {}
    await store.bind_user(pid, "browser-1", user(1), LONG)
    await store.bind_user(pid, "browser-1", user(2), LONG)  # the same browser connects another wallet
    await store.bind_user(pid, "browser-2", user(1), LONG)
    await store.bind_user(pid, "short", user(1), SHORT)
    found = await store.tracking_ids_of(pid, [user(1), user(2), user(3), user(1)])
    assert found == {user(1): {"browser-1", "browser-2", "short"}, user(2): {"browser-1"}}
    assert await store.tracking_ids_of(other_pid, [user(1)]) == {}  # nothing crosses projects
    await asyncio.sleep(PAST)
    assert (await store.tracking_ids_of(pid, [user(1)]))[user(1)] == {"browser-1", "browser-2"}  # "short" ran out
    assert await store.tracking_ids_of(pid, []) == {}
