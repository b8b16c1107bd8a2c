"""The production HTTP services' key cache (rewards.domain.keys.KeyCache, RedisStateStore.follow_key_changes): resolved
keys are served from memory, yet a revoked key or a deleted project is refused by every process within 1 s, also
when a process's subscription to the key changes is lost; and totals stay exact with the cache on. The
revocations are also run on a Redis Cluster (marked `cluster`; tests.support.redis_cluster), where a PUBLISH counts the
subscribers of its own node only."""

import asyncio
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest
from redis.asyncio import Redis

from rewards.adapters.production import redis_keys
from rewards.adapters.production.redis_state import open_redis_state
from rewards.adapters.production.redis_state.projects import KEY_CHANGES_CHANNEL, KEY_LIVE_S
from rewards.domain import keys
from tests.conftest import SERVICE, event, evm
from tests.support.harness import (
    Admin,
    Api,
    ProductionServer,
    eventually,
    free_port,
    run_async,
    stop_processes,
    url_for,
    wait_healthy,
)

BOUND_S = 1.0  # the bound: a revocation reaches every process within it


# -- the cache alone ------------------------------------------------------------------------------


@dataclass(frozen=True)
class P:
    key_id: str
    project_id: str


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _cache(ttl_s: float = 3.0, live_s: float = 0.6) -> tuple[keys.KeyCache, Clock]:
    clock = Clock()
    return keys.KeyCache(ttl_s, live_s, clock=clock), clock


def test_a_key_is_served_until_its_ttl_and_only_while_the_follower_hears_from_redis():
    cache, clock = _cache()
    secret_hash = keys.hash_secret("s3cret")
    cache.put("k1", secret_hash, P("k1", "p1"), cache.generation)
    assert cache.get("k1", "s3cret") is None  # never heard from Redis: nothing is served
    cache.heard(clock.now)
    assert cache.get("k1", "s3cret") == P("k1", "p1")
    assert cache.get("k1", "other") is None  # the secret is compared with the stored hash
    clock.now += 0.5
    assert cache.get("k1", "s3cret") == P("k1", "p1")
    clock.now += 0.2  # 0.7 s since it last heard: the subscription may have lost a message
    assert cache.get("k1", "s3cret") is None
    cache.heard(clock.now - 0.1)
    assert cache.get("k1", "s3cret") == P("k1", "p1")
    clock.now += 2.4  # past the TTL (3 s after the put), though live
    cache.heard(clock.now)
    assert cache.get("k1", "s3cret") is None


def test_drops_and_suspends_forget_and_an_answer_read_before_a_drop_is_not_kept():
    cache, clock = _cache()
    cache.heard(clock.now)
    for key_id, project in (("k1", "p1"), ("k2", "p1"), ("k3", "p2")):
        cache.put(key_id, keys.hash_secret(key_id), P(key_id, project), cache.generation)
    cache.drop_key("k3")
    assert cache.get("k3", "k3") is None and cache.get("k1", "k1") is not None
    cache.drop_project("p1")
    assert len(cache) == 0
    read_before = cache.generation
    cache.drop_key("k9")  # a change arrives while a request is reading Redis
    cache.put("k1", keys.hash_secret("k1"), P("k1", "p1"), read_before)
    assert len(cache) == 0
    cache.put("k1", keys.hash_secret("k1"), P("k1", "p1"), cache.generation)
    cache.suspend()  # the subscription is lost: everything is forgotten, nothing served until heard again
    assert len(cache) == 0
    cache.put("k1", keys.hash_secret("k1"), P("k1", "p1"), cache.generation)
    assert cache.get("k1", "k1") is None
    cache.heard(clock.now)
    assert cache.get("k1", "k1") == P("k1", "p1")


def test_the_cache_keeps_hashes_not_keys():
    cache, clock = _cache()
    cache.heard(clock.now)
    api_key, key_id, secret_hash = keys.new_key()
    cache.put(key_id, secret_hash, P(key_id, "p"), cache.generation)
    assert keys.split_key(api_key)[1] not in repr(cache._entries)


# -- the state store's follower, on Redis -----------------------------------------------------------


async def _wait(check, timeout_s: float) -> float:
    """Seconds until `check()` (a coroutine) is true; fails past `timeout_s`."""
    started = time.monotonic()
    while not await check():
        assert time.monotonic() - started < timeout_s, f"not within {timeout_s} s"
        await asyncio.sleep(0.01)
    return time.monotonic() - started


async def _following(redis_url: str):
    store = await open_redis_state(redis_url)
    store.follow_key_changes(60)
    await _wait(lambda: _live(store), 5)
    return store


async def _live(store) -> bool:
    return time.monotonic() - store._key_cache._heard_at < KEY_LIVE_S


@pytest.fixture(params=["redis_url", pytest.param("redis_cluster_url", marks=pytest.mark.cluster)])
def any_redis_url(request) -> str:
    """One Redis node, and with `-m cluster` a node of a Redis Cluster."""
    return request.getfixturevalue(request.param)


async def test_revocations_and_deletions_by_another_process_are_applied_before_they_return(any_redis_url):
    writer, follower = await open_redis_state(any_redis_url), await _following(any_redis_url)
    try:
        project = await writer.create_project("cache")
        first, second = await writer.create_key(project, [SERVICE]), await writer.create_key(project, [SERVICE])
        assert (await follower.resolve_key(first)).project_id == project
        await follower.resolve_key(second)
        assert len(follower._key_cache) == 2
        # Served from memory: a change made behind the store's back (no message) is not seen until the TTL...
        await writer._redis.hset(redis_keys.api_key(keys.split_key(first)[0]), "scopes", '["referral_codes:read"]')
        assert (await follower.resolve_key(first)).scopes == frozenset([SERVICE])
        # ...but a revocation is: it returns once every follower dropped the key.
        assert await writer.revoke_key(second) is True
        assert await follower.resolve_key(second) is None
        assert await writer.revoke_key(second) is False
        assert await writer.delete_project(project) is True
        assert len(follower._key_cache) == 0
        assert (await follower.resolve_key(first)).project_deleted is True
    finally:
        await follower.stop_following_key_changes()
        await follower.close()
        await writer.close()


async def test_a_lost_subscription_serves_nothing_from_the_cache_until_subscribed_again(redis_url):
    writer, follower = await open_redis_state(redis_url), await _following(redis_url)
    try:
        project = await writer.create_project("cache")
        key = await writer.create_key(project, [SERVICE])
        await follower.resolve_key(key)
        assert len(follower._key_cache) == 1
        await writer._redis.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        # A revocation whose message the follower cannot get (written alone, as if lost with the connection):
        await writer._redis.hset(redis_keys.api_key(keys.split_key(key)[0]), "revoked_ms", 1)

        async def refused() -> bool:
            return await follower.resolve_key(key) is None

        assert await _wait(refused, BOUND_S) < BOUND_S
        await _wait(lambda: _live(follower), 5)  # subscribed again
        assert await follower.resolve_key(key) is None
    finally:
        await follower.stop_following_key_changes()
        await follower.close()
        await writer.close()


async def test_the_follower_keeps_hearing_from_redis_and_stops_cleanly(redis_url):
    follower = await _following(redis_url)
    try:
        for _ in range(5):
            await asyncio.sleep(KEY_LIVE_S / 2)
            assert await _live(follower)
        redis = Redis.from_url(redis_url, decode_responses=True)
        try:
            [(_, subscribed)] = await redis.pubsub_numsub(KEY_CHANGES_CHANNEL)  # (the services' processes too)
            await follower.stop_following_key_changes()
            # The services' followers may resubscribe meanwhile (a late PONG under load): poll for ours leaving.
            for _ in range(50):
                [(_, now_subscribed)] = await redis.pubsub_numsub(KEY_CHANGES_CHANNEL)
                if now_subscribed < subscribed:
                    break
                await asyncio.sleep(0.05)
            assert now_subscribed < subscribed
        finally:
            await redis.aclose()
    finally:
        await follower.stop_following_key_changes()
        await follower.close()


async def test_the_follower_stops_when_redis_py_swallows_its_cancellation(redis_url, monkeypatch):
    """redis-py can swallow a cancellation that lands inside a read's timeout: the follower must still end (a shutdown
    or a test's event loop would wait for it forever). Here every read swallows it, as the race does now and then."""
    from redis.asyncio.client import PubSub

    read = PubSub.parse_response

    async def swallowing(self, *args, **kwargs):
        try:
            return await read(self, *args, **kwargs)
        except asyncio.CancelledError:
            return None

    monkeypatch.setattr(PubSub, "parse_response", swallowing)
    follower = await _following(redis_url)
    try:
        task = follower._key_follower
        await asyncio.sleep(KEY_LIVE_S / 2)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=2)
        assert task in done and task.cancelled()
    finally:
        follower._key_follower = None
        await follower.close()


# -- two `rewards ingest-api` processes -------------------------------------------------------------


@pytest.fixture
def two_ingest(production_server):
    """The production server's ingest process and a second one on its own port, so each is asked in turn."""
    port = free_port()
    second = subprocess.Popen([sys.executable, "-m", "rewards", "ingest-api", "--port", str(port)],
                              env=production_server.env)  # fmt: skip
    try:
        wait_healthy(f"http://127.0.0.1:{port}", [second])
        other = ProductionServer.__new__(ProductionServer)
        other.urls = {"ingest": f"http://127.0.0.1:{port}", "query": production_server.urls["query"]}
        yield [production_server, other]
    finally:
        stop_processes([second])


def _status(server, api_key: str) -> int:
    response = httpx.get(url_for(server, "GET", "/api/v1/events/status"), params={"dedup_id": "x"},
                         headers={"Authorization": f"Bearer {api_key}"}, timeout=10)  # fmt: skip
    return response.status_code


def _seconds_until_all(servers, api_key: str, status: int) -> float:
    started = time.monotonic()
    while any(_status(server, api_key) != status for server in servers):
        assert time.monotonic() - started < 5, f"not {status} on every process within 5 s"
        time.sleep(0.01)
    return time.monotonic() - started


def _cli(server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rewards", *args], env=server.env, capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip


def test_every_ingest_process_refuses_a_revoked_key_within_1_s(two_ingest, production_server):
    admin = Admin(production_server)
    project = admin.project()
    by_cli, by_store, behind_its_back = (admin.key(project, SERVICE) for _ in range(3))
    for api_key in (by_cli, by_store, behind_its_back):
        assert [_status(server, api_key) for server in two_ingest] == [200, 200]

    # Cached in each process: a revocation written without its message is not seen at once.
    key_hash = redis_keys.api_key(keys.split_key(behind_its_back)[0])

    async def hset():
        redis = Redis.from_url(production_server.env["REDIS_URL"])
        try:
            await redis.hset(key_hash, "revoked_ms", 1)
        finally:
            await redis.aclose()

    run_async(hset())
    assert [_status(server, behind_its_back) for server in two_ingest] == [200, 200]

    _cli(production_server, "key", "revoke", by_cli)  # the CLI returns once every process dropped the key
    assert _seconds_until_all(two_ingest, by_cli, 401) < BOUND_S

    admin.revoke(by_store)  # as `rewards key revoke` does, in this process
    assert _seconds_until_all(two_ingest, by_store, 401) < BOUND_S


def test_every_ingest_process_answers_404_for_a_deleted_project_within_1_s(two_ingest, production_server):
    admin = Admin(production_server)
    project = admin.project()
    api_key = admin.key(project, SERVICE)
    assert [_status(server, api_key) for server in two_ingest] == [200, 200]
    _cli(production_server, "project", "delete", project)
    assert _seconds_until_all(two_ingest, api_key, 404) < BOUND_S


CONFIG = {
    "default_tier": None,
    "tiers": [],
    "conversions": [{"event_name": "purchase", "base": {"fixed": "7"}, "end_user_reward": {"rate": "1"}}],
}


def test_totals_stay_exact_when_two_processes_take_overlapping_batches(two_ingest, production_server):
    """20 batches of 50 events, each sharing 25 ids with the one before, each posted to both processes at
    once (each post with a key of its own: the limit is 10 batches a minute per key): every id is accepted once
    and paid once."""
    admin = Admin(production_server)
    project = admin.project()
    apis = [[Api(server, admin.key(project, SERVICE), project) for _ in range(20)] for server in two_ingest]
    try:
        apis[0][0].put("/projects/config", json=CONFIG).raise_for_status()
        batches = [[event(f"t{b * 25 + i}", user=evm(i % 7)) for i in range(50)] for b in range(20)]

        def post(number: int, process: int) -> int:
            api = apis[process][number]
            response = api.post("/events/batch", json={"events": batches[number]})
            while response.status_code == 503:  # the other process holds some ids of the batch for a moment
                time.sleep(0.05)
                response = api.post("/events/batch", json={"events": batches[number]})
            assert response.status_code == 200, response.text
            return response.json()["ingested_events"]

        with ThreadPoolExecutor(2) as pool:
            accepted = sum(sum(pool.map(lambda p, n=n: post(n, p), (0, 1))) for n in range(20))
        unique = {e["dedup_id"] for batch in batches for e in batch}
        assert accepted == len(unique) == 525
        apis[0][0].wait_processed(*(e["dedup_id"] for e in batches[-1]), timeout_s=60)

        def exact():
            summary = apis[0][0].get("/payouts/summary", params={"currency": "point"}).json()["total_payouts"]
            assert summary == str(7 * len(unique))  # 7 to the user of each event (CONFIG), each exactly once

        eventually(exact, timeout_s=60)
    finally:
        for pair in apis:
            for api in pair:
                api.close()
