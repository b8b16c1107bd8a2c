"""ProjectStore on Redis: projects, their API keys, their payout configuration and claim signer; and the key cache
(follow_key_changes), which keeps resolved keys per process and drops them when a key changes anywhere."""

import asyncio
import json
import time
import uuid
from collections.abc import Sequence

import structlog
from redis.asyncio.cluster import RedisCluster

from rewards.adapters.production import redis_keys
from rewards.adapters.production.redis_client import is_cluster
from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_state.base import RedisStateBase, _json, _ms
from rewards.domain import keys
from rewards.domain.claim_signing import StoredSigner
from rewards.domain.payout_config import EMPTY_CONFIG, PayoutConfig
from rewards.domain.timestamps import now_ms
from rewards.ports import KeyInfo, Principal, ProjectInfo

log = structlog.get_logger(__name__)

# The key cache (follow_key_changes): a revoked key or deleted project reaches every process within KEY_LIVE_S.
KEY_CHANGES_CHANNEL = f"{redis_keys.PREFIX}:keys:changes"
KEY_PING_S = 0.1  # the follower PINGs its subscription this often
KEY_LIVE_S = 0.6  # the cache serves only while its follower heard a PONG sent within this (else Redis is asked)
KEY_SILENT_S = 3.0  # a subscription silent this long is dropped and made again
KEY_RESUBSCRIBE_S = 0.2  # after a lost subscription, wait this before the next
KEY_ACK_WAIT_S = 1.0  # a revocation waits this long at most for every process to acknowledge it


class RedisProjectStore(RedisStateBase):
    """The production adapter of rewards.ports.ProjectStore."""

    async def create_project(self, name: str) -> str:
        project_id = uuid.uuid4().hex
        await self._redis.hset(ProjectKeys(project_id).project(), mapping={"name": name, "created_ms": now_ms()})
        return project_id

    async def delete_project(self, project_id: str) -> bool:
        """Deleted, and every process caching the project's keys told: it answers 404 for them once this returns
        (or within KEY_LIVE_S: see _tell_key_change)."""
        project = ProjectKeys(project_id).project()
        return await self._tell_key_change(self._scripts.delete_project, project, f"project {project_id}")

    async def project_exists(self, project_id: str) -> bool:
        name, deleted = await self._redis.hmget(ProjectKeys(project_id).project(), ["name", "deleted_ms"])
        return name is not None and deleted is None

    async def get_project(self, project_id: str) -> ProjectInfo | None:
        row = await self._redis.hgetall(ProjectKeys(project_id).project())
        if "name" not in row:
            return None
        deleted = row.get("deleted_ms")
        return ProjectInfo(project_id, row["name"], int(row["created_ms"]), None if deleted is None else int(deleted))

    async def list_projects(self) -> list[ProjectInfo]:
        """A SCAN of the keyspace (every master of a cluster): there is no index of projects to keep exact, and this is
        an operator's rare listing (seconds at millions of keys)."""
        found = {}  # by id: SCAN may return a key twice
        async for key in self._redis.scan_iter(match=f"{redis_keys.PREFIX}:{{*}}:project", count=1000):
            project_id = key.split("{", 1)[1].split("}", 1)[0]
            if key == ProjectKeys(project_id).project() and (project := await self.get_project(project_id)):
                found[project_id] = project
        return sorted(found.values(), key=lambda p: (p.created_ms, p.project_id))

    async def list_keys(self, project_id: str) -> list[KeyInfo]:
        """A SCAN of the keyspace, as list_projects."""
        found = {}  # by id: SCAN may return a key twice
        async for key in self._redis.scan_iter(match=redis_keys.api_key("*"), count=1000):
            row = await self._redis.hgetall(key)
            if row.get("project_id") == project_id:
                revoked = row.get("revoked_ms")
                scopes = tuple(json.loads(row["scopes"]))
                key_id = key.removeprefix(redis_keys.api_key(""))
                found[key_id] = KeyInfo(
                    key_id, scopes, int(row["created_ms"]), None if revoked is None else int(revoked)
                )
        return sorted(found.values(), key=lambda k: (k.created_ms, k.key_id))

    async def revoke_key_id(self, key_id: str) -> bool:
        row = await self._redis.hgetall(redis_keys.api_key(key_id))
        if not row or "revoked_ms" in row:
            return False
        return await self._tell_key_change(self._scripts.revoke_key, redis_keys.api_key(key_id), f"key {key_id}")

    async def create_key(self, project_id: str, scopes: Sequence[str]) -> str:
        api_key, key_id, secret_hash = keys.new_key()
        mapping = {
            "project_id": project_id,
            "secret_hash": secret_hash.hex(),
            "scopes": _json(sorted(set(scopes))),
            "created_ms": now_ms(),
        }
        await self._redis.hset(redis_keys.api_key(key_id), mapping=mapping)
        return api_key

    async def revoke_key(self, api_key: str) -> bool:
        """Revoked, and every process caching the key told: it answers 401 once this returns (or within
        KEY_LIVE_S: see _tell_key_change)."""
        parts = keys.split_key(api_key)
        if parts is None or (await self._read_key(*parts))[0] is None:
            return False
        return await self._tell_key_change(self._scripts.revoke_key, redis_keys.api_key(parts[0]), f"key {parts[0]}")

    async def resolve_key(self, api_key: str) -> Principal | None:
        """From this process's key cache when it follows key changes (follow_key_changes), else from Redis."""
        parts = keys.split_key(api_key)
        if parts is None:
            return None
        cache = self._key_cache
        if cache is None:
            return (await self._read_key(*parts))[0]
        found = cache.get(*parts)
        if found is not None:
            return found
        generation = cache.generation
        principal, secret_hash = await self._read_key(*parts)
        if principal is not None:
            cache.put(principal.key_id, secret_hash, principal, generation)
        return principal

    async def _read_key(self, key_id: str, secret: str) -> tuple[Principal | None, bytes]:
        """The key's principal (None: unknown, revoked, another secret, or its project gone) and stored hash."""
        row = await self._redis.hgetall(redis_keys.api_key(key_id))
        if not row or "revoked_ms" in row:
            return None, b""
        secret_hash = bytes.fromhex(row["secret_hash"])
        if not keys.secret_matches(secret, secret_hash):
            return None, b""
        project = ProjectKeys(row["project_id"]).project()
        name, deleted = await self._redis.hmget(project, ["name", "deleted_ms"])
        if name is None:
            return None, b""
        scopes = frozenset(json.loads(row["scopes"]))
        return Principal(key_id, row["project_id"], scopes, deleted is not None), secret_hash

    # -- the key cache: resolved keys kept per process, dropped when a key changes anywhere ------------

    _key_cache: keys.KeyCache | None = None
    _key_follower: asyncio.Task | None = None

    def follow_key_changes(self, ttl_s: float) -> None:
        """Serve resolved keys from a per-process cache for up to `ttl_s`, kept exact within KEY_LIVE_S by
        following the key changes every process publishes (KEY_CHANGES_CHANNEL): a revoked key or a deleted
        project is dropped when its message arrives, and the whole cache is bypassed while the follower has not
        heard from Redis for KEY_LIVE_S (its connection lost, or slow), then forgotten until it resubscribes."""
        if self._key_follower is None:
            self._key_cache = keys.KeyCache(ttl_s, KEY_LIVE_S)
            self._key_follower = asyncio.create_task(self._follow_key_changes(self._key_cache))

    async def stop_following_key_changes(self) -> None:
        follower, self._key_follower, self._key_cache = self._key_follower, None, None
        if follower is not None:
            follower.cancel()
            await asyncio.wait([follower], timeout=KEY_SILENT_S)  # never holds a shutdown back for long

    async def _follow_key_changes(self, cache: keys.KeyCache) -> None:
        while True:
            _stop_if_cancelled()
            try:
                await self._follow_subscribed(cache)
            except Exception as exc:  # Redis gone or too slow: nothing is served from the cache until resubscribed
                log.warning("key_changes_unfollowed", error=repr(exc))
            finally:
                cache.suspend()
            await asyncio.sleep(KEY_RESUBSCRIBE_S)

    async def _follow_subscribed(self, cache: keys.KeyCache) -> None:
        """Apply each key change published, PINGing the subscription every KEY_PING_S: its PONG comes after every
        message published before the PING reached Redis, so the cache has heard everything sent before the PING
        left. Returns (raises) when nothing came back for KEY_SILENT_S."""
        clock = time.monotonic  # the cache's clock
        async with self._redis.pubsub() as pubsub:
            subscribing = clock()
            await pubsub.subscribe(KEY_CHANGES_CHANNEL)
            pings: dict[str, float] = {}
            heard_at, next_ping, sequence = clock(), clock(), 0
            while True:
                _stop_if_cancelled()
                if clock() >= next_ping:
                    sequence += 1
                    pings[str(sequence)] = clock()
                    await pubsub.ping(str(sequence))
                    next_ping = clock() + KEY_PING_S
                reply = await pubsub.parse_response(block=False, timeout=max(0.0, next_ping - clock()))
                if reply is None:
                    if clock() - heard_at > KEY_SILENT_S:
                        raise TimeoutError(f"no answer on the key changes' subscription for {KEY_SILENT_S} s")
                    continue
                heard_at = clock()
                # redis-py's get_message misreads a PONG carrying a payload (it comes as a plain string): read raw.
                kind, data = ("pong", reply) if isinstance(reply, str) else (reply[0], reply[-1])
                if kind == "subscribe":
                    cache.suspend()  # (also bumps the generation: nothing read before it is put after it)
                    cache.heard(subscribing)
                elif kind == "pong":
                    sent = pings.pop(data, None)
                    for older in [p for p in pings if int(p) < int(data)]:
                        del pings[older]
                    if sent is not None:
                        cache.heard(sent)
                elif kind == "message":
                    await self._apply_key_change(cache, data)

    async def _apply_key_change(self, cache: keys.KeyCache, message: str) -> None:
        kind, _, rest = message.partition(" ")
        changed, _, ack = rest.partition(" ")
        if kind == "key":
            cache.drop_key(changed)
        elif kind == "project":
            cache.drop_project(changed)
        else:
            cache.suspend()  # a change this version does not know: forget everything to be safe
            cache.heard(time.monotonic())
        if ack:
            try:
                await self._scripts.ack_key_change(keys=[ack], args=[_ms(KEY_ACK_WAIT_S * 5)])
            except Exception as exc:  # the change's author waits KEY_ACK_WAIT_S at most
                log.warning("key_change_not_acknowledged", error=repr(exc))

    async def _tell_key_change(self, script, key: str, change: str) -> bool:
        """Run a key change's script, which publishes it, then wait (KEY_ACK_WAIT_S at most) until every process
        that received it has applied it: a request after this returns is answered without the key. A process
        that does not acknowledge in time serves it at most KEY_LIVE_S after the change anyway (KeyCache)."""
        ack = f"{redis_keys.PREFIX}:keys:ack:{uuid.uuid4().hex}"
        changed, told = await script(keys=[key], args=[now_ms(), KEY_CHANGES_CHANNEL, f"{change} {ack}"])
        if changed and is_cluster(self._redis):
            told = await self._key_change_subscribers()
        deadline = time.monotonic() + KEY_ACK_WAIT_S
        while told > 0 and (left := deadline - time.monotonic()) > 0:
            if await self._redis.blpop([ack], timeout=max(0.01, left)) is None:
                break
            told -= 1
        return changed == 1

    async def _key_change_subscribers(self) -> int:
        """The processes following key changes, on a cluster: a PUBLISH there reaches the subscribers of every node,
        but counts those of its own node only. (One that subscribed since the PUBLISH is counted too: the change
        then waits KEY_ACK_WAIT_S for its acknowledgement, which never comes; its cache is new anyway.)"""
        [(_, subscribers)] = await self._redis.pubsub_numsub(KEY_CHANGES_CHANNEL, target_nodes=RedisCluster.ALL_NODES)
        return subscribers

    async def get_config(self, project_id: str) -> PayoutConfig:
        document = await self._redis.get(ProjectKeys(project_id).config())
        return EMPTY_CONFIG if document is None else PayoutConfig.model_validate_json(document)

    async def put_config(self, project_id: str, config: PayoutConfig) -> None:
        await self._redis.set(ProjectKeys(project_id).config(), config.model_dump_json())

    async def put_claim_signer(self, project_id: str, signer: StoredSigner | None) -> None:
        key = ProjectKeys(project_id).claim_signer()
        if signer is None:
            await self._redis.delete(key)
            return
        mapping = {"address": signer.address, "sealed_key": signer.sealed_key, "updated_ms": now_ms()}
        await self._redis.hset(key, mapping=mapping)

    async def get_claim_signer(self, project_id: str) -> StoredSigner | None:
        address, sealed_key = await self._redis.hmget(ProjectKeys(project_id).claim_signer(), ["address", "sealed_key"])
        return None if address is None or sealed_key is None else StoredSigner(address=address, sealed_key=sealed_key)


def _stop_if_cancelled() -> None:
    """Raise CancelledError if the running task was cancelled: redis-py can swallow a cancellation that lands inside a
    read's timeout (a known race of its asyncio client), and the follower would then PING on forever, so that a process
    (or a test's event loop) waiting for it to end would never stop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
