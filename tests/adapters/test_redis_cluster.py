"""The production shape on a Redis Cluster (rewards.adapters.production.redis_client).

Without a cluster: every command the state store, the outbox relay and the rate limiter send (every Lua script
among them) keeps to the keys of one cluster slot, and none is a MULTI transaction; checked on one node, by a
client that refuses what a cluster would.

On a local cluster of 3 masters (marked `cluster`; tests.support.redis_cluster): the client is chosen by REDIS_CLUSTER;
SCAN and DBSIZE cover every master; and the production services run on it end to end: ingest, workers, outbox,
rate limits, and a key revoked in one process refused by the others within 1 s. (The state store's whole
contract runs on the cluster in tests/contract/.)
"""

import asyncio
import hashlib
import subprocess
import sys
import time
from dataclasses import fields
from decimal import Decimal
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import MovedError, RedisClusterException, ResponseError

from rewards.adapters.production import outbox_relay, redis_keys
from rewards.adapters.production.outbox_relay import OutboxRelay
from rewards.adapters.production.redis_client import is_cluster, open_redis
from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_scripts import Scripts
from rewards.adapters.production.redis_state import RedisStateStore, open_redis_state
from rewards.adapters.production.redis_state.projects import KEY_LIVE_S
from rewards.domain import claim_checks as cc
from rewards.domain.allotment import WHOLE, Ask, CapRule, Grant, Limits, Tally, tallied
from rewards.domain.integrity import Rejection
from rewards.domain.reversals import Owed, Reversal, TakeBack
from rewards.domain.timestamps import now_ms
from rewards.domain.webhook_events import LEASE_MS, after_attempt, new_delivery
from rewards.domain.webhooks import Endpoint
from rewards.settings import Settings
from rewards.web import ratelimit
from rewards.web.ratelimit import RateLimiter
from tests.conftest import SERVICE, event, evm
from tests.contract.support import Boom, affiliate, batch, check, create_codes, ingest, user
from tests.support.harness import Admin, Api, ProductionServer, url_for

CAP = Rejection.CAP_EXCEEDED


# -- every command keeps to one slot (one node) ---------------------------------------------------------------


class SlotCheckingRedis(Redis):
    """A client of one Redis node that refuses what a Redis Cluster refuses: a command (a script among them)
    whose keys lie in more than one slot; and a MULTI transaction, which the store never uses. It records the
    scripts it ran (`ran`: their SHA1s)."""

    ran: set[str]

    async def execute_command(self, *args, **options):
        command = str(args[0]).upper()
        if command in ("EVAL", "EVALSHA"):
            keys = args[3 : 3 + int(args[2])]
            self.ran.add(args[1])
        else:
            keys = await self._keys_of(*args)
        slots = {key_slot(self.get_encoder().encode(key)) for key in keys}
        assert len(slots) <= 1, f"{command} over {len(slots)} slots: {keys}"
        return await super().execute_command(*args, **options)

    async def _keys_of(self, *args) -> list:
        try:
            return await super().execute_command("COMMAND GETKEYS", *args)
        except ResponseError:  # a command without keys (PING, SCAN, SCRIPT LOAD, ...)
            return []

    def pipeline(self, transaction: bool = True, shard_hint=None):
        assert not transaction, "a MULTI transaction: use a Lua script (rewards.adapters.production.redis_client)"
        return super().pipeline(transaction, shard_hint)


def slot_checking(url: str, ran: set[str]) -> SlotCheckingRedis:
    client = SlotCheckingRedis.from_url(url, decode_responses=True)
    client.ran = ran
    return client


class KnownArchive:
    """The warehouse's archive of event ids (the DedupArchive port), knowing `known` only."""

    def __init__(self, known: set[str]):
        self.known = known

    async def known_among(self, project_id, dedup_ids, window_s):
        return {d: "processed" for d in dedup_ids if d in self.known}

    async def written_since(self, project_id, since_ms):
        return sorted(self.known)

    async def close(self):
        pass


class Published:
    """The event log (EventLog port) of the outbox relay: keeps what it is given."""

    shards = 1  # never spreads conversions

    def __init__(self):
        self.messages: list[bytes] = []

    async def publish(self, project_id: str, message: bytes) -> None:
        self.messages.append(message)


class MaybePublished(Exception):
    """A publish whose outcome the log cannot tell (as kafka_log.PublishFailed): the change stands."""

    maybe_published = True


def unchanged(check: cc.ClaimCheck) -> cc.ClaimCheck:
    return check


OWN_DB = 9  # this test's database: the relay reads the whole outbox index, which no other test's changes reach


async def _until_following(store: RedisStateStore) -> None:
    while time.monotonic() - store._key_cache._heard_at >= KEY_LIVE_S:
        await asyncio.sleep(0.01)


async def test_every_script_and_command_keeps_to_one_slot(redis_url, monkeypatch):
    own_url = urlunsplit(urlsplit(redis_url)._replace(path=f"/{OWN_DB}"))
    ran: set[str] = set()
    store = RedisStateStore(slot_checking(own_url, ran), archive=KnownArchive({"s-9"}))
    await store._redis.flushdb()
    relay_client = slot_checking(own_url, ran)
    monkeypatch.setattr(outbox_relay, "open_redis", lambda *args, **kwargs: asyncio.sleep(0, relay_client))
    monkeypatch.setattr(outbox_relay, "IDLE_S", 0)  # the relay forgets an idle project at once
    published = Published()
    relay = OutboxRelay.open(own_url, published)
    try:
        project = await store.create_project("slots")
        key = await store.create_key(project, [SERVICE])
        store.follow_key_changes(60)
        await asyncio.wait_for(_until_following(store), 5)
        assert (await store.resolve_key(key)).project_id == project
        assert await store.revoke_key(key) is True  # acknowledged by the follower
        await store.put_config(project, await store.get_config(project))

        async with store.create_affiliate(project, affiliate(1)):
            pass
        with pytest.raises(Boom):
            async with store.create_affiliate(project, affiliate(2)):
                raise Boom
        assert list(await store.affiliates_among(project, [user(1), user(2)])) == [user(1)]

        [code] = await create_codes(store, project, user(1), 1, 5)
        with pytest.raises(Boom):
            async with store.create_codes(project, user(1), 2, None):
                raise Boom
        assert (await store.list_codes(project, user(1), 0, 10))[1] == 1
        assert (await store.set_max_uses(project, code, 3)).max_uses == 3
        assert await store.codes_of(project, [user(1), user(2)]) == {user(1): [code]}
        async with store.use_code(project, code, user(2), {}):
            pass
        with pytest.raises(Boom):
            async with store.use_code(project, code, user(3), {}):
                raise Boom
        assert (await store.get_code(project, code)).current_uses == 1

        # affiliate codes and referral removals (API.md §7)
        async with store.create_affiliate_code(project, user(5), "slots", Decimal("0.1"), {}):
            pass
        with pytest.raises(Boom):
            async with store.create_affiliate_code(project, user(6), "undone", None, {}):
                raise Boom
        async with store.rename_affiliate_code(project, user(5), "slots_2", {}):
            pass
        with pytest.raises(Boom):
            async with store.rename_affiliate_code(project, user(5), "slots_3", {}):
                raise Boom
        assert (await store.set_rebate_rate(project, user(5), "slots", Decimal("0.2"), {})).code == "SLOTS_2"
        async with store.use_code(project, "slots", user(7), {}):
            pass
        assert (await store.referrals_among(project, [user(7)]))[user(7)].code == "SLOTS_2"
        assert await store.rebate_rates(project, ["SLOTS_2"]) == {"SLOTS_2": Decimal("0.2")}
        with pytest.raises(Boom):
            async with store.remove_referral(project, user(7), "slots_2", user(5)):
                raise Boom
        async with store.remove_referral(project, user(7), "slots_2", user(5)):
            pass

        assert (await ingest(store, project, *batch("s-1", "s-2", "s-9"), ("idem", "hash"))).fresh == [0, 1]
        with pytest.raises(Boom):
            async with store.ingest(project, *batch("s-3"), None):
                raise Boom
        await store.mark_processed(project, ["s-1"])
        assert await store.processed_among(project, ["s-1", "s-2"]) == {"s-1"}
        await store._redis.hset(ProjectKeys(project).archive_filter(), "run", "another-instance")  # (a restart)
        assert (await ingest(store, project, *batch("s-4", "s-9"))).fresh == [0]  # the archive filter: re-fed
        await store._filter.settled()
        assert await store.event_status(project, "s-2") == "accepted"
        async with store.reverse(project, [Reversal("s-1", "refund", Decimal("0.5"))], now_ms()):  # ReversalStore
            pass
        with pytest.raises(Boom):
            async with store.reverse(project, [Reversal("s-1", "undone", Decimal("0.5"))], now_ms()):
                raise Boom
        await store.mark_reversed(project, {"s-1": Decimal("0.5")})
        assert await store.reversed_shares(project, ["s-1", "s-2"]) == {"s-1": Decimal("0.5")}
        owed = [TakeBack(cc.check_id(project, "payout-9"), user(1), "0xusdc", 5)]  # never registered: all owed
        assert (await store.take_back(project, "delivery-9:take_back", owed))[1] == [5]
        assert await store.settle_debts(project, "delivery-10:settle", [Owed(user(1), "0xusdc", 7)]) == [5]
        held = [{"payout_id": "conversion:s-1:9", "amount": "1"}, {"payout_id": "conversion:s-1:8", "amount": "2"}]
        await store.hold_payouts(project, held)  # ApprovalStore
        with pytest.raises(Boom):
            async with store.decide_payouts(project, ["conversion:s-1:9"], "approved", None, now_ms()):
                raise Boom
        async with store.decide_payouts(project, ["conversion:s-1:9", "conversion:s-1:8"], "rejected", "x", now_ms()):
            pass
        hook = Endpoint("wh_1", "https://93.184.216.34/", ("reward.earned",), None, True, "plain:00", 1)  # WebhookStore
        await store.create_webhook(project, hook)
        assert await store.put_webhook(project, hook.with_changes(enabled=False))
        # the webhook queue (WebhookQueue): each project's script, then the global index's, in a slot of its own
        queued = [new_delivery(project, "wh_1", "reward.earned", f"s-{n}", b"{}", now_ms()) for n in range(3)]
        assert await store.enqueue(queued) == 3 and await store.pending_deliveries() == 3
        leased = await store.lease(now_ms(), 10, 10, {}, LEASE_MS)
        attempted = [after_attempt(leased[0], False, 500, None, now_ms()), after_attempt(leased[1], True, 200, None, 1)]
        assert await store.settle(attempted, now_ms()) == {"wh_1": None}
        older, total = await store.list_deliveries(project, "wh_1", 1, 10)
        assert len(older) == 2 and total == 3
        assert (await store.redeliver(project, "wh_1", leased[1].id, now_ms())).status == "pending"
        assert (await store.get_delivery(project, "wh_1", leased[1].id)).attempts == 1
        assert await store.sweep_deliveries(now_ms()) == 0 and await store.pending_deliveries() == 3
        await store.forget_endpoint(project, "wh_1")
        assert await store.pending_deliveries() == 0

        a, b = check(project, 1, user(1)), check(project, 2, user(1))
        await store.register_claim_checks(project, [a, b])
        async with store.update_claim_checks(project, [a.id, b.id], cc.close, user(1)):
            pass
        with pytest.raises(Boom):
            async with store.update_claim_checks(project, [a.id], unchanged, None):
                raise Boom
        async with store.update_claim_checks(project, [a.id], unchanged, None):
            raise MaybePublished  # swallowed: the change stands, and its entry is due at once

        async with store.first_within(project, "repeat", 60) as first:  # tracking events (TrackingStore)
            assert first
        with pytest.raises(Boom):
            async with store.first_within(project, "failed", 60):
                raise Boom
        await store.bind_code(project, "track-1", code, 60)
        assert await store.bind_user(project, "track-1", user(4), 60) == code
        assert await store.tracked_user(project, "track-1") == user(4)

        await store.block_user(project, user(8), "slots")  # the blocklist (IntegrityStore)
        assert (await store.blocklist_page(project, 0, 10))[1] == 1
        assert await store.blocklisted_among(project, [user(8), user(9)]) == {user(8)}
        assert await store.unblock_user(project, user(8)) is True

        caps = {
            "point": (CapRule(("end_user",), 10, "rolling", 86_400_000), CapRule(("end_user",), 9, "calendar_month"))
        }
        limits = Limits(budgets={"point": 100}, caps=caps)  # caps and budgets (AllotmentStore)
        asks = [Ask("conversion:s-1:0", user(1), "end_user", "point", 12, now_ms()), Ask("conversion:s-1:1", user(2),
                "end_user", "point", 3, now_ms())]  # fmt: skip
        assert await store.allot(project, "delivery-1", limits, asks, {"point": 0}) == [Grant(9, CAP), Grant(3, None)]
        assert await store.budgets_paid(project, ["point"]) == {"point": 12}
        tallies = tallied([Ask("conversion:s-2:0", user(3), "end_user", "point", 4, now_ms())])[0]
        assert await store.allot_tallies(project, "delivery-2", limits, tallies) == [WHOLE]
        await store.forget_grants(project, ["delivery-1", "delivery-2"])
        assert await store.release(project, "cc_slots", "point", 2) is True  # an expired check back in the budget
        given = [Tally(user(1), "end_user", "point", 3, {now_ms(): 3})]
        assert await store.give_back(project, "delivery-3:given_back", limits, given) is True  # a reversal's units
        await store.reset_budgets(project, ["point"])

        await store.bound_unexpiring_keys()
        assert await store.key_count() > 0
        assert await relay.run_once() == 1 and len(published.messages) == 1  # the entry made due
        assert await relay.run_once() == 0  # and the project, idle, leaves the index
        assert await store._redis.zscore(redis_keys.outbox_projects(), project) is None
        erasure_id = await store.request_erasure(project, user(1))  # erasure_request
        (taken,) = await store.take_erasures(10)  # erasure_take
        await store.erase_users(project, {user(1): taken.pseudonym})  # erasure_swap (the affiliate's field)
        await store.finish_erasures([taken])  # erasure_finish
        assert await store.erasure_status(project, erasure_id) == "done"
        assert await store.delete_project(project) is True

        await RateLimiter(redis=store._redis).hit("events_batch", "key-1")
        every_script = {getattr(Scripts.register(store._redis), f.name).sha for f in fields(Scripts)}
        every_script.add(hashlib.sha1(ratelimit.HIT.encode()).hexdigest())
        assert every_script - ran == set()  # each script was run, and checked
    finally:
        await relay.close()
        await store.stop_following_key_changes()
        await store.close()


# -- on a local cluster ----------------------------------------------------------------------------------------


def _key_on_another_node(cluster: RedisCluster, than_url: str) -> str:
    """A key served by another node than the one at `than_url`."""
    keys = (f"rw:probe:{n}" for n in range(1000))
    return next(key for key in keys if cluster.get_node_from_key(key).port != urlsplit(than_url).port)


@pytest.mark.cluster
async def test_the_client_is_chosen_by_redis_cluster(redis_cluster_url, redis_url):
    cluster = await open_redis(redis_cluster_url, Settings(redis_cluster="auto"))
    single = await open_redis(redis_url, Settings(redis_cluster="auto"))
    plain_on_cluster = await open_redis(redis_cluster_url, Settings(redis_cluster="false"))
    try:
        assert is_cluster(cluster) and not is_cluster(single) and not is_cluster(plain_on_cluster)
        elsewhere = _key_on_another_node(cluster, redis_cluster_url)
        await cluster.set(elsewhere, "1")
        with pytest.raises(MovedError):  # what every Redis client of the shape met before
            await plain_on_cluster.get(elsewhere)
        with pytest.raises(RedisClusterException):
            await open_redis(redis_url, Settings(redis_cluster="true"))
    finally:
        for client in (cluster, single, plain_on_cluster):
            await client.aclose()


@pytest.mark.cluster
async def test_scans_and_counts_visit_every_master(redis_cluster_url):
    store = await open_redis_state(redis_cluster_url)
    try:
        masters = {node.name for node in store._redis.get_primaries()}
        projects: dict[str, str] = {}  # master → a project whose keys it serves
        while len(projects) < len(masters):
            project = await store.create_project("scan")
            projects.setdefault(store._redis.get_node_from_key(ProjectKeys(project).project()).name, project)
        unbounded = [ProjectKeys(p).dedup("old-1") for p in projects.values()]
        for key in unbounded:  # written before the windows existed: no TTL
            await store._redis.set(key, "processed")
        on_each = [await store._redis.dbsize(target_nodes=store._redis.get_node(node_name=name)) for name in masters]
        assert min(on_each) > 0 and await store.key_count() == sum(on_each)
        assert await store.bound_unexpiring_keys() >= len(unbounded)
        assert [await store._redis.pttl(key) > 0 for key in unbounded] == [True] * len(unbounded)
    finally:
        await store.close()


# -- the production services on the cluster ---------------------------------------------------------------------

CONFIG = {
    "default_tier": None,
    "tiers": [],
    "conversions": [{"event_name": "purchase", "base": {"fixed": "7"}, "end_user_reward": {"rate": "1"}}],
}


@pytest.fixture(scope="module")
def cluster_server(kafka_url, redis_cluster_url, clickhouse_url):
    engines = {"KAFKA_BOOTSTRAP_SERVERS": kafka_url, "REDIS_URL": redis_cluster_url, "CLICKHOUSE_URL": clickhouse_url}
    server = ProductionServer(engines).start()
    yield server
    server.stop()


def _status(server, path: str, api_key: str) -> int:
    headers = {"Authorization": f"Bearer {api_key}"}
    url = url_for(server, "GET", "/api/v1" + path)
    return httpx.get(url, params={"dedup_id": "x"}, headers=headers, timeout=10).status_code


@pytest.mark.cluster
def test_the_production_services_run_on_the_cluster(cluster_server):
    admin = Admin(cluster_server)
    project = admin.project()
    api = Api(cluster_server, admin.key(project, SERVICE), project)
    try:
        api.put("/projects/config", json=CONFIG).raise_for_status()
        events = [event(f"c-{n}", user=evm(n % 7)) for n in range(40)]
        response = api.post("/events/batch", json={"events": events})
        assert response.status_code == 200, response.text
        assert response.json()["ingested_events"] == 40
        assert api.post("/events/batch", json={"events": events}).json()["ingested_events"] == 0  # duplicates
        owner = {"user_identifier": evm(1), "user_identifier_type": "evm_address"}
        created = api.post("/referral_codes", json={**owner, "quantity": 2})
        assert created.status_code == 201, created.text
        listed = api.get("/referral_codes", params=owner)
        assert listed.status_code == 200, listed.text
        assert sorted(c["code"] for c in listed.json()["results"]) == sorted(c["code"] for c in created.json())
        api.wait_processed(*(e["dedup_id"] for e in events), timeout_s=60)
        summary = api.get("/payouts/summary", params={"currency": "point"}).json()
        assert summary["total_payouts"] == str(7 * 40)

        # Revoked by the CLI, another process, which returns once the services' processes (each following the
        # key changes on the cluster's node of the channel) dropped the key: refused at once by ingest and query.
        revoke = [sys.executable, "-m", "rewards", "key", "revoke", api.api_key]
        subprocess.run(revoke, env=cluster_server.env, capture_output=True, timeout=60, check=True)
        statuses = [_status(cluster_server, path, api.api_key) for path in ("/events/status", "/payouts/summary")]
        assert statuses == [401, 401]
    finally:
        api.close()
