"""StateStore on Redis (redis-py's asyncio client): the production adapter of Redis's role.

Behaves as SqliteStateStore (the reference), with one difference in shape: a SQLite transaction can
stay open while the block publishes, a Redis change cannot. So each context manager applies its
change on entry and undoes it if the block raises; until the undo, concurrent readers can see it:

- create_codes: the new codes (not yet returned to anyone, so practically invisible).
- create_affiliate: the affiliate (a concurrent registration of the same user gets False / 409).
- use_code: the incremented uses, the use in `used_by` and the referral edge. Meanwhile a concurrent
  use may be refused for it (code at its limit, user already referred, cycle) and a worker may pay
  along the edge.
- update_claim_checks: the changed checks. The undo puts a check back only if no later update
  replaced it since (a later update built on ours and published its own state).
- create_affiliate_code: the code (its name taken, its owner's one affiliate code); rename_affiliate_code: the
  code under its new name (the undo moves it back only if it still has that name); remove_referral: the referral's
  absence.
- ingest: claims are *pending* until the block exits, and pending ids read as not found; an
  overlapping request gets BatchInFlight until then (at most PENDING_TTL_S).

A change whose reply is lost (connection reset, timeout, cancellation) may or may not have been made:
each change (and the batch claim) then runs the same undo, which matches exactly what this request
would have written, so it is safe either way. The client never retries a command itself.

The four changes the warehouse must learn of (all but ingest) are written by one Lua script each, together
with an entry of the project's outbox holding the message the block publishes (`Change.payload`): a process
killed between the change and its publish leaves the entry, which the outbox relay publishes once due
(OUTBOX_DUE_S later; rewards.adapters.production.outbox_relay), so Redis and the warehouse never disagree for good.
The block's success deletes the entry. Its failure undoes the change and the entry together, unless the
entry is no longer the request's own (the relay leased or published it: the change stands), or the publish
may have gone through (a cancellation, or `maybe_published` on the log's exception): then the change stands
and the entry is made due at once. A change that stands is a success: the block's exception is swallowed (a
cancellation goes on), so the request answers what it changed, and a repeat on the log is dropped downstream.

A change that another change was built on before it was published stands too, since undoing it would pull the
ground from under the other (redis_scripts' outbox_build_on): a use of a code stands on the code's creation or
rename (so an undo never frees or moves a name a user was referred through), and on the removal of the user's
earlier referral, whose message it carries ahead of its own (the workers refuse a use of a user the warehouse holds
a referral of); a removal stands on the use that made the referral. A request that reads a code by a name reads it
atomically with the name's lookup, and again when a script finds it renamed since (use_code, set_max_uses, the undo of
a use): a rename never fails a request for a name that stays valid.

The same code runs on one node and on a Redis Cluster (rewards.adapters.production.redis_client picks the client): every
script keeps to one project's slot, and nothing uses MULTI or WATCH.

Key layout: rewards.adapters.production.redis_keys; the Lua scripts: rewards.adapters.production.redis_scripts.
"""

import asyncio
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import partial
from typing import Any, TypeVar

import structlog
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from rewards.adapters.production import redis_keys
from rewards.adapters.production.redis_client import RedisClient, is_cluster, open_redis
from rewards.adapters.production.redis_keys import ProjectKeys, parse_user_field, user_field
from rewards.adapters.production.redis_scripts import Scripts
from rewards.domain import keys
from rewards.domain.affiliates import affiliate_record, codes_created_record, stored_affiliate, stored_attributes
from rewards.domain.amounts import format_amount
from rewards.domain.claim_checks import ClaimCheck, ClaimCheckNotFound, from_record, to_record
from rewards.domain.claim_signing import StoredSigner
from rewards.domain.codes import generate_code, normalize_code
from rewards.domain.errors import IdempotencyKeyReused
from rewards.domain.payout_config import EMPTY_CONFIG, PayoutConfig
from rewards.domain.payouts import User
from rewards.domain.referrals import (
    AddressInUse,
    AffiliateCodeNotFound,
    CodeInUse,
    CodeNotFound,
    CodeRecord,
    CodeUse,
    MaxUsesBelowCurrent,
    ReferralNotFound,
    check_use,
    max_uses_below_current,
    referral_removed_record,
)
from rewards.domain.timestamps import now_ms
from rewards.ports import Affiliate, Change, DedupArchive, IngestClaim, Principal, Referral
from rewards.settings import Settings
from schemas.records import ClaimCheckRecord, CodeUseRecord, dump_records

log = structlog.get_logger(__name__)
_T = TypeVar("_T")

PENDING_TTL_S = 60  # a claimed batch must be published and committed within this, or its claim lapses
IDEMPOTENCY_TTL_S = 24 * 3600
COMMIT_RETRIES_S = (0.05, 0.25, None)  # a batch's commit in Redis: the pause after each failed try (None: give up)
USED_BY_LIMIT = 1000  # a code record shows its latest uses only; current_uses still counts them all
_CHAIN_LIMIT = 64  # referral chains are walked this far when looking for cycles
_KEY_KIND = re.compile(rf"{redis_keys.PREFIX}:{{[^}}]*}}:(dedup|user_events):")
_ATTEMPTS = 20  # optimistic retries (a script's re-check found a change) before giving up
OUTBOX_DUE_S = 30  # an outbox entry is its request's this long (> a publish's longest wait), then the relay's
OUTBOX_TOUCH_FRESH_S = 20  # a change is written within this long of its touch of the relay's index (outbox_relay)
# The key cache (follow_key_changes): a revoked key or deleted project reaches every process within KEY_LIVE_S.
KEY_CHANGES_CHANNEL = f"{redis_keys.PREFIX}:keys:changes"
KEY_PING_S = 0.1  # the follower PINGs its subscription this often
KEY_LIVE_S = 0.6  # the cache serves only while its follower heard a PONG sent within this (else Redis is asked)
KEY_SILENT_S = 3.0  # a subscription silent this long is dropped and made again
KEY_RESUBSCRIBE_S = 0.2  # after a lost subscription, wait this before the next
KEY_ACK_WAIT_S = 1.0  # a revocation waits this long at most for every process to acknowledge it


class BatchInFlight(Exception):
    """Some events of the batch (or its Idempotency-Key) are claimed by another request not yet finished:
    nothing was accepted; a retry shortly after succeeds (as a duplicate or a replay). HTTP: 503."""

    def __init__(self, dedup_ids: list[str]):
        super().__init__(f"{len(dedup_ids)} event(s) of the batch are being accepted by another request")
        self.dedup_ids = dedup_ids


class StateChanging(Exception):
    """An optimistic update kept meeting concurrent changes and gave up."""


@asynccontextmanager
async def _undo_on_raise(undo: Callable[[], Awaitable[Any]]):
    """Run `undo` if the block raises (a failed publication must leave no trace), then re-raise."""
    try:
        yield
    except BaseException:
        await _try_undo(undo)
        raise


async def _applied(apply: Awaitable[_T], undo: Callable[[], Awaitable[Any]]) -> _T:
    """Await `apply`; if its reply is lost, the change may or may not have been made: `undo` it to be sure."""
    try:
        return await apply
    except (RedisConnectionError, RedisTimeoutError, asyncio.CancelledError):
        await _try_undo(undo)
        raise


async def _try_undo(undo: Callable[[], Awaitable[Any]]) -> Any:
    try:
        return await undo()
    except Exception:
        log.exception("state_undo_failed")


@dataclass(frozen=True)
class _Entry:
    """An outbox entry: the message of one change, its request's to publish until `due_ms`, then the relay's."""

    id: str
    due_ms: int
    payload: bytes = b""


def _new_entry(entry_id: str | None = None) -> _Entry:
    return _Entry(entry_id or uuid.uuid4().hex, now_ms() + _ms(OUTBOX_DUE_S))


def _stale(result: Any) -> bool:
    """The change script refused: its touch of the relay's index was too old (see OUTBOX_TOUCH_FRESH_S)."""
    return result == "stale" or (isinstance(result, list) and result[:1] == ["stale"])


def _maybe_published(exc: BaseException) -> bool:
    """Whether the block may have published before failing with `exc`: cancelled (perhaps mid-publish), or a
    publish whose outcome the log cannot tell (kafka_log.PublishFailed.maybe_published)."""
    return isinstance(exc, asyncio.CancelledError) or getattr(exc, "maybe_published", False) is True


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def _pairs(flat: list[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


class RedisStateStore:
    """The production adapter of rewards.ports.StateStore, so of each of its ports: ProjectStore, AffiliateStore,
    ReferralStore, IngestStore, ClaimCheckStore and TrackingStore.

    Dedup windows: an accepted id is kept for `dedup_window_s`; once processed or failed, for `hot_window_s`
    (never past its window; None: the whole window). With an `archive` (the warehouse's `dedup_ids`), ids Redis
    no longer knows are asked of it, once per batch and only for the ids the claim found fresh, so Redis holds
    only the hot window (and a batch retried after Redis lost its last second is still found known once
    written). Every production process opens it with the hot window: the ingest edge with the archive, the
    workers (which mark ids processed) ask the warehouse themselves. A user's event names live a window after
    their last event; Idempotency-Key records `idempotency_ttl_s`."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        dedup_window_s: float = 35 * 86400,
        hot_window_s: float | None = None,
        idempotency_ttl_s: float = IDEMPOTENCY_TTL_S,
        archive: DedupArchive | None = None,
    ):
        self._redis = redis
        self._scripts = Scripts.register(redis)
        self._archive = archive
        self._window_s = dedup_window_s
        hot = dedup_window_s if hot_window_s is None else min(hot_window_s, dedup_window_s)
        self._window_ms, self._hot_ms, self._idempotency_ms = _ms(dedup_window_s), _ms(hot), _ms(idempotency_ttl_s)

    # -- projects and keys -------------------------------------------------------------------

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

    # -- affiliates ----------------------------------------------------------------------------

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

    # -- referral codes ------------------------------------------------------------------------

    @asynccontextmanager
    async def create_codes(self, project_id: str, owner: User, quantity: int, max_uses: int | None):
        k, created_ms, codes = ProjectKeys(project_id), now_ms(), _draw_codes(quantity)
        for _ in range(_ATTEMPTS):  # all or none: candidates colliding with existing codes are drawn again
            former = await self._redis.hmget(k.code_names(), codes)  # a renamed code's names stay its own
            if any(name is not None for name in former):
                codes = _draw_codes(quantity, [c for c, name in zip(codes, former, strict=True) if name is None])
                continue
            records = [CodeRecord(code, owner, created_ms, max_uses, 0, []) for code in codes]
            entry = replace(_new_entry(), payload=dump_records([codes_created_record(project_id, owner, records)]))
            code_keys = [k.code(c) for c in codes]
            undo = self._outbox_undo(k, entry, self._scripts.undo_codes, [k.owner_codes(owner), *code_keys], codes)
            args = [user_field(owner), created_ms, "" if max_uses is None else max_uses, *codes]
            writing = (self._scripts.create_codes, [k.code_seq(), k.owner_codes(owner), *code_keys], args)
            result = await self._outbox_write(k, entry, *writing, undo)
            if result[0] == "created":
                break
            codes = _draw_codes(quantity, [c for c in codes if c not in result[1:]])
        else:
            raise StateChanging(f"referral codes kept colliding with existing ones ({k.project_id})")
        async with self._published(k, entry, undo, records) as change:
            yield change

    async def list_codes(self, project_id: str, owner: User, offset: int, limit: int) -> tuple[list[CodeRecord], int]:
        k = ProjectKeys(project_id)
        count, codes = await self._scripts.owner_codes(keys=[k.owner_codes(owner)], args=[offset, offset + limit - 1])
        if limit <= 0:
            codes = []
        return await self._read_codes(k, codes), count

    async def codes_of(self, project_id: str, owners: Sequence[User]) -> dict[User, list[str]]:
        k, unique = ProjectKeys(project_id), list(dict.fromkeys(owners))
        async with self._redis.pipeline(transaction=False) as pipe:
            for owner in unique:
                pipe.zrevrange(k.owner_codes(owner), 0, -1)
            found = await pipe.execute()
        return {owner: codes for owner, codes in zip(unique, found, strict=True) if codes}

    async def get_code(self, project_id: str, code: str) -> CodeRecord | None:
        k, name = ProjectKeys(project_id), normalize_code(code)
        records = await self._read_codes(k, [name])
        if not records:  # a renamed code's former name finds it
            current = await self._redis.hget(k.code_names(), name)
            records = [] if current is None else await self._read_codes(k, [current])
        return records[0] if records else None

    async def _code_by_name(
        self, k: ProjectKeys, name: str, user: User | None = None
    ) -> tuple[str, CodeRecord | None, str | None]:
        """The code `name` finds now, read atomically with what finds it (a rename moves a code to its new name, so a
        name read apart from the code may be stale by the read): its current name, its record (None: no code has the
        name), and `user`'s referral edge (None: none, or no user given)."""
        current = name
        for _ in range(_ATTEMPTS):
            keys = [k.code_names(), k.code(current), *([] if user is None else [k.referrals()])]
            found = await self._scripts.code_by_name(
                keys=keys, args=[name, current, "" if user is None else user_field(user)]
            )
            if found[0] == "code":
                return current, _code_record(current, _pairs(found[1]), []), found[2] or None
            current = found[1]
        raise StateChanging(f"referral code {name} kept being renamed ({k.project_id})")

    async def set_max_uses(self, project_id: str, code: str, max_uses: int | None) -> CodeRecord:
        k, name, limit = ProjectKeys(project_id), normalize_code(code), "" if max_uses is None else max_uses
        for _ in range(_ATTEMPTS):  # checked here, then again by the script (a use or a rename may come in between)
            current, record, _ = await self._code_by_name(k, name)
            if record is None:
                raise CodeNotFound("Referral code not found")
            if max_uses_below_current(max_uses, record.current_uses):
                raise MaxUsesBelowCurrent(f"max_uses must not be less than current_uses ({record.current_uses})")
            keys = [k.code(current), k.code_uses(current)]
            result = await self._scripts.set_max_uses(keys=keys, args=[limit, USED_BY_LIMIT])
            if result[0] == "set":
                return _code_record(current, _pairs(result[1]), result[2])
        raise StateChanging(f"referral code {name} kept changing")

    @asynccontextmanager
    async def use_code(self, project_id: str, code: str, user: User, proof: dict):
        k, used_at, use_id = ProjectKeys(project_id), now_ms(), uuid.uuid4().hex
        use = _json({"use_id": use_id, "user": user_field(user), "at": used_at, "proof": proof})
        record, event, entry, undo = await self._apply_use(k, normalize_code(code), user, (use, used_at), use_id)
        async with self._published(k, entry, undo, (record, event)) as change:
            yield change

    async def _apply_use(
        self, k: ProjectKeys, name: str, user: User, use: tuple[str, int], use_id: str
    ) -> tuple[CodeRecord, CodeUseRecord, _Entry, Callable]:
        """Check the use in Python, then apply it with a script that re-checks what may have changed since (a rename
        too: the code is then looked up again by the name given). Returns the code, the use, its entry (the message
        its script wrote: the use's record, after any record it carries) and its undo."""
        use_json, used_at = use
        entry = _new_entry(use_id)
        for _ in range(_ATTEMPTS):
            code, record, referrer = await self._use_snapshot(k, name, user)
            chains = await self.referrer_chains(k.project_id, [record.owner], _CHAIN_LIMIT)
            check_use(record, user, referrer, chains[record.owner])
            event = _code_use_record(k.project_id, entry.id, record, user, used_at)
            entry = replace(entry, payload=dump_records([event]))
            undo = self._use_undo(k, entry, code, use_json, user)
            edge = _json({"by": user_field(record.owner), "code": code, "at": used_at, "use": entry.id})
            max_uses = "" if record.max_uses is None else str(record.max_uses)
            args = [user_field(user), use_json, edge, user_field(record.owner), _CHAIN_LIMIT, USED_BY_LIMIT, max_uses]
            keys = [k.code(code), k.code_uses(code), k.referrals(), k.referral_removals()]
            result = await self._outbox_write(k, entry, self._scripts.use_code, keys, args, undo)
            if result[0] == "used":
                entry = replace(entry, payload=result[3].encode())
                return _code_record(code, _pairs(result[1]), result[2]), event, entry, undo
        raise StateChanging(f"referral code {name} kept changing while being used")

    async def _use_snapshot(self, k: ProjectKeys, name: str, user: User) -> tuple[str, CodeRecord, User | None]:
        """The code `name` finds (its current name and record) and the user's referrer, read together: use_code's
        script re-checks them."""
        code, record, edge = await self._code_by_name(k, name, user)
        if record is None:
            raise CodeNotFound("Referral code not found")
        return code, record, None if edge is None else parse_user_field(json.loads(edge)["by"])

    def _use_undo(self, k: ProjectKeys, entry: _Entry, code: str, use_json: str, user: User) -> Callable:
        """The undo of a use made under the name `code`: under the code's current name (it may be renamed by then)."""

        async def undo():
            current = code
            for _ in range(_ATTEMPTS):
                keys = [k.outbox(), k.outbox_records(), k.code_names(), k.code(current), k.code_uses(current),
                        k.referrals()]  # fmt: skip
                args = [entry.id, entry.due_ms, use_json, user_field(user), entry.id, code, current]
                result = await self._scripts.undo_use(keys=keys, args=args)
                if not isinstance(result, list):
                    return result
                current = result[1]
            raise StateChanging(f"referral code {code} kept being renamed while its use was undone")

        return undo

    async def referral_of(self, project_id: str, user: User) -> Referral | None:
        return (await self.referrals_among(project_id, [user])).get(user)

    async def referrer_chains(self, project_id: str, users: Sequence[User], depth: int) -> dict[User, list[User]]:
        users = list(dict.fromkeys(users))
        if not users:
            return {}
        args = [max(depth, 0), *(user_field(user) for user in users)]
        found = await self._scripts.referrer_chains(keys=[ProjectKeys(project_id).referrals()], args=args)
        return {user: [parse_user_field(f) for f in chain] for user, chain in zip(users, found, strict=True)}

    async def _read_codes(self, k: ProjectKeys, codes: list[str]) -> list[CodeRecord]:
        """The records of `codes` in order (codes that no longer exist are left out)."""
        if not codes:
            return []
        keys = [key for code in codes for key in (k.code(code), k.code_uses(code))]
        found = await self._scripts.read_codes(keys=keys, args=[USED_BY_LIMIT])
        records = (_code_record(code, _pairs(fields), uses) for code, (fields, uses) in zip(codes, found, strict=True))
        return [record for record in records if record is not None]

    # -- events ----------------------------------------------------------------------------------

    @asynccontextmanager
    async def ingest(
        self,
        project_id: str,
        dedup_ids: list[str],
        users_and_names: list[tuple[User, str]],
        idempotency: tuple[str, str] | None,
    ):
        k, token = ProjectKeys(project_id), uuid.uuid4().hex
        idem_key, body_hash = idempotency or ("", "")
        dedup_keys = [k.dedup(d) for d in dedup_ids]
        claimed: list[str] = dedup_keys  # until the claim answers, any of them may be ours

        def abort():
            return self._scripts.abort_batch(keys=[k.idempotency(idem_key), *claimed], args=[token])

        claiming = self._claim_batch(k.idempotency(idem_key), dedup_keys, dedup_ids, token, idempotency)
        claim = await _applied(claiming, abort)
        if claim.replay is not None:
            yield claim
            return
        claimed = [dedup_keys[i] for i in claim.fresh]
        async with _undo_on_raise(abort):
            await self._drop_archived(k, project_id, dedup_ids, claim, token)
            claimed = [dedup_keys[i] for i in claim.fresh]
            yield claim
        events = [users_and_names[i] for i in claim.fresh]
        mode = "" if idempotency is None else ("drop" if claim.response is None else "store")
        await self._commit_claims(
            project_id,
            keys=[k.idempotency(idem_key), *claimed, *(k.user_events(user) for user, _ in events)],
            args=[token, len(claimed), mode, body_hash, claim.response or b"", self._idempotency_ms, self._window_ms]
            + [name for _, name in events],
        )

    async def _commit_claims(self, project_id: str, keys: list[str], args: list) -> None:
        """Turn the batch's claims into accepted ids. The batch is on the log by now: a failure here must not
        answer 503 ("not accepted"), so the commit (idempotent) is tried again, and if Redis still does not
        answer, the claims are left to lapse (PENDING_TTL_S; the workers mark the ids processed meanwhile)."""
        for delay_s in COMMIT_RETRIES_S:
            try:
                lost = await self._scripts.commit_batch(keys=keys, args=args)
            except (RedisConnectionError, RedisTimeoutError) as exc:
                if delay_s is None:
                    log.error("ingest_commit_failed; its claims lapse", project_id=project_id, error=repr(exc))
                    return
                await asyncio.sleep(delay_s)
                continue
            if lost:
                log.warning("ingest_claims_lapsed", project_id=project_id, lost=lost, pending_ttl_s=PENDING_TTL_S)
            return

    async def _drop_archived(
        self, k: ProjectKeys, project_id: str, dedup_ids: list[str], claim: IngestClaim, token: str
    ) -> None:
        """Ids the hot window did not know but the archive does are duplicates: release their claims."""
        if self._archive is None or not claim.fresh:
            return
        known = await self._archive.known_among(project_id, [dedup_ids[i] for i in claim.fresh], self._window_s)
        if known:
            await self._scripts.release_claims(keys=[k.dedup(d) for d in known], args=[token])
            claim.fresh = [i for i in claim.fresh if dedup_ids[i] not in known]

    async def _claim_batch(
        self, idem: str, dedup_keys: list[str], dedup_ids: list[str], token: str, idempotency: tuple[str, str] | None
    ) -> IngestClaim:
        body_hash = "" if idempotency is None else idempotency[1]
        result = await self._scripts.claim_batch(
            keys=[idem, *dedup_keys], args=[token, _ms(PENDING_TTL_S), "0" if idempotency is None else "1", body_hash]
        )
        match result[0]:
            case "conflict":
                raise IdempotencyKeyReused("Idempotency-Key has already been used with a different body")
            case "replay":
                return IngestClaim(replay=result[1].encode())
            case "busy":
                raise BatchInFlight([dedup_ids[i] for i in result[1]])
        return IngestClaim(fresh=list(result[1]))

    async def event_status(self, project_id: str, dedup_id: str) -> str | None:
        """Past the hot window, the archive answers; an id Redis still has `accepted` is asked of it too (its
        processed mark may have been lost in a crash of Redis: the warehouse's answer then repairs it)."""
        status = await self._redis.get(ProjectKeys(project_id).dedup(dedup_id))
        if status in (None, "accepted") and self._archive is not None:
            written = (await self._archive.known_among(project_id, [dedup_id], self._window_s)).get(dedup_id)
            if written is not None and status == "accepted":
                await self._mark(project_id, [dedup_id], written)
            return written or status
        return status if status in ("accepted", "processed", "failed") else None

    async def has_event(self, project_id: str, user: User, name: str) -> bool:
        return await self._redis.sismember(ProjectKeys(project_id).user_events(user), name) == 1

    async def mark_processed(self, project_id: str, dedup_ids: list[str]) -> None:
        await self._mark(project_id, dedup_ids, "processed")

    async def mark_failed(self, project_id: str, dedup_ids: list[str]) -> None:
        await self._mark(project_id, dedup_ids, "failed")

    async def _mark(self, project_id: str, dedup_ids: list[str], status: str) -> None:
        if dedup_ids:
            k = ProjectKeys(project_id)
            await self._scripts.mark_processed(keys=[k.dedup(d) for d in dedup_ids], args=[status, self._hot_ms])

    async def processed_among(self, project_id: str, dedup_ids: list[str]) -> set[str]:
        """What Redis knows as done (the workers ask the warehouse about the rest: Redis may have forgotten)."""
        if not dedup_ids:
            return set()
        values = await self._redis.mget([ProjectKeys(project_id).dedup(d) for d in dedup_ids])
        return {d for d, value in zip(dedup_ids, values, strict=True) if value in ("processed", "failed")}

    async def key_count(self) -> int:
        """How many keys Redis holds (all of them, on every master of a cluster: a bound for bound_unexpiring_keys'
        progress)."""
        if is_cluster(self._redis):
            return await self._redis.dbsize(target_nodes=RedisCluster.PRIMARIES)  # (redis-py sums the answers)
        return await self._redis.dbsize()

    async def bound_unexpiring_keys(self, scan_count: int = 1000, scanned: Callable[[int], Any] | None = None) -> int:
        """Give the dedup keys and user_events sets written before the windows existed (no TTL) one: processed
        and failed ids the hot window, accepted ids and event-name sets the window. A one-off after upgrading
        (SCAN, on every master of a cluster: bounded work per call to Redis, safe beside running services); returns
        how many keys it bounded.
        `scanned(n)` is told of each project key looked at (`rewards bound-redis-keys` shows a progress bar)."""
        bounded = 0
        async for key in self._redis.scan_iter(match=f"{redis_keys.PREFIX}:{{*}}:*", count=scan_count):
            if scanned is not None:
                scanned(1)
            kind = _KEY_KIND.match(key)
            if kind is None or await self._redis.pttl(key) != -1:
                continue
            expected = "string" if kind[1] == "dedup" else "set"
            if await self._redis.type(key) != expected:
                continue
            value = await self._redis.get(key) if kind[1] == "dedup" else None
            ttl = self._hot_ms if value in ("processed", "failed") else self._window_ms
            bounded += await self._redis.pexpire(key, ttl, nx=True)
        return bounded

    # -- claim checks ----------------------------------------------------------------------------

    async def register_claim_checks(self, project_id: str, checks: Sequence[ClaimCheck]) -> None:
        if checks:
            k = ProjectKeys(project_id)
            records = [to_record(project_id, check).model_dump_json() for check in checks]
            await self._scripts.register_claim_checks(keys=[k.claim_check(check.id) for check in checks], args=records)

    @asynccontextmanager
    async def update_claim_checks(
        self, project_id: str, ids: Sequence[str], change: Callable[[ClaimCheck], ClaimCheck], owner: User | None
    ):
        k = ProjectKeys(project_id)
        check_keys = [k.claim_check(check_id) for check_id in ids]
        if not check_keys:
            yield Change([], None)
            return
        for _ in range(_ATTEMPTS):  # written only if no check changed since read (else read again)
            before = await self._redis.mget(check_keys)
            changed = [change(_owned_check(raw, i, owner)) for raw, i in zip(before, ids, strict=True)]
            records = [to_record(project_id, check) for check in changed]
            after = [record.model_dump_json() for record in records]
            entry = replace(_new_entry(), payload=dump_records(records))
            swaps = [value for pair in zip(after, before, strict=True) for value in pair]
            undo = self._outbox_undo(k, entry, self._scripts.undo_claim_checks, check_keys, swaps)
            pairs = [value for pair in zip(before, after, strict=True) for value in pair]
            writing = (self._scripts.update_claim_checks, check_keys, pairs)
            if await self._outbox_write(k, entry, *writing, undo) == "updated":
                break
        else:
            raise StateChanging(f"{check_keys[0]} kept changing")
        async with self._published(k, entry, undo, changed) as published:
            yield published

    async def get_claim_checks(self, project_id: str, ids: Sequence[str]) -> list[ClaimCheck]:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        k = ProjectKeys(project_id)
        found = await self._redis.mget([k.claim_check(check_id) for check_id in ids])  # one slot: the project's
        return [from_record(ClaimCheckRecord.model_validate_json(raw)) for raw in found if raw is not None]

    # -- the outbox of the changes above (outbox_relay publishes what their requests did not) ---------------------

    async def _outbox_write(
        self, k: ProjectKeys, entry: _Entry, script, keys: list[str], args: list, undo: Callable
    ) -> Any:
        """Run `script`, a change that writes `entry` with it, after touching the relay's index (so the relay
        reads this project's outbox); touched again if the script found the touch too old (a long stall)."""
        for _ in range(_ATTEMPTS):
            touched = await self._scripts.outbox_touch(keys=[redis_keys.outbox_projects()], args=[k.project_id])
            entry_args = [entry.id, entry.due_ms, entry.payload, int(touched) + _ms(OUTBOX_TOUCH_FRESH_S)]
            applying = script(keys=[k.outbox(), k.outbox_records(), *keys], args=[*entry_args, *args])
            result = await _applied(applying, undo)
            if not _stale(result):
                return result
        raise StateChanging(f"the outbox of project {k.project_id} kept going stale")

    @staticmethod
    def _outbox_undo(k: ProjectKeys, entry: _Entry, script, keys: list[str], args: list) -> Callable:
        """The undo of a change: removes it and its entry, if the entry is still the request's own."""
        return lambda: script(keys=[k.outbox(), k.outbox_records(), *keys], args=[entry.id, entry.due_ms, *args])

    @asynccontextmanager
    async def _published(
        self, k: ProjectKeys, entry: _Entry, undo: Callable, value: Any, published: Callable | None = None
    ):
        """The block publishes the entry's message: then the entry goes (by `published` when given). If it raises,
        `undo`, unless it may have published: then the change stands and the relay publishes its entry at once. A
        change that stands (this way, or because the relay leased its entry first, or another change was built on
        it: see redis_scripts' outbox_build_on) is a success: the block's LogUnavailable is swallowed, so the request
        answers what it changed rather than a 503 whose retry would find the change made."""
        try:
            yield Change(value, entry.payload)
        except BaseException as exc:
            if not _maybe_published(exc):
                if not isinstance(exc, Exception) or await _try_undo(undo) != 0:
                    raise  # undone (or unknown: Redis did not answer the undo, which is logged)
                log.warning("state_change_kept_relayed", project_id=k.project_id, entry=entry.id, error=repr(exc))
                return
            log.warning("state_change_kept_for_relay", project_id=k.project_id, entry=entry.id, error=repr(exc))
            keys, args = [k.outbox(), k.outbox_records()], [entry.id, entry.due_ms]
            await _try_undo(lambda: self._scripts.outbox_due_now(keys=keys, args=args))
            if not isinstance(exc, Exception):
                raise  # a cancellation goes on; the relay publishes the change
            return
        try:
            if published is None:
                await self._scripts.outbox_delete(keys=[k.outbox(), k.outbox_records()], args=[entry.id])
            else:
                await published()
        except Exception:  # the relay publishes it again once due: a repeat, dropped downstream
            log.warning("outbox_entry_not_deleted", project_id=k.project_id, entry=entry.id, exc_info=True)

    # -- plumbing --------------------------------------------------------------------------------

    async def ping(self) -> None:
        await self._redis.ping()

    async def close(self) -> None:
        await self._redis.aclose()
        if self._archive is not None:
            await self._archive.close()

    # -- tracking events (API.md §7): keys with TTLs (see redis_keys) ------------------------------------------

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
        return code

    async def tracked_user(self, project_id: str, tracking_id: str) -> User | None:
        value = await self._redis.get(ProjectKeys(project_id).tracking_user(tracking_id))
        return None if value is None else parse_user_field(value)

    # -- affiliate codes (API.md §7): a code chosen by its owner; renamed, it keeps its former names ------------

    @asynccontextmanager
    async def create_affiliate_code(
        self, project_id: str, owner: User, code: str, rebate_rate: Decimal | None, proof: dict
    ):
        k, name, created_ms = ProjectKeys(project_id), normalize_code(code), now_ms()
        record = CodeRecord(name, owner, created_ms, None, 0, [], chosen=True, rebate_rate=_rate(rebate_rate))
        entry = replace(_new_entry(), payload=dump_records([codes_created_record(project_id, owner, [record])]))
        owner_field = user_field(owner)
        undo_keys = [k.owner_codes(owner), k.code(name), k.affiliate_codes()]
        undo = self._outbox_undo(k, entry, self._scripts.undo_affiliate_code, undo_keys, [name, owner_field])
        keys = [k.code_seq(), k.owner_codes(owner), k.code(name), k.code_names(), k.affiliate_codes()]
        args = [owner_field, created_ms, name, _rate_text(rebate_rate), _json(proof)]
        result = await self._outbox_write(k, entry, self._scripts.create_affiliate_code, keys, args, undo)
        if result == "code_in_use":
            raise CodeInUse()
        if result == "address_in_use":
            raise AddressInUse()
        async with self._published(k, entry, undo, record) as change:
            yield change

    @asynccontextmanager
    async def rename_affiliate_code(self, project_id: str, owner: User, code: str, proof: dict):
        k, name, owner_field = ProjectKeys(project_id), normalize_code(code), user_field(owner)
        for _ in range(_ATTEMPTS):  # the script re-checks that the owner's code still has the name read
            old = await self._redis.hget(k.affiliate_codes(), owner_field)
            if old is None:
                raise AffiliateCodeNotFound("The user has no affiliate code")
            fields = await self._redis.hgetall(k.code(old))
            before = _code_record(old, fields, [])
            if before is None:
                continue
            if old == name:
                yield Change((await self._read_codes(k, [old]))[0], None)
                return
            renamed = replace(before, code=name, names=tuple(sorted({*before.names, old} - {name})))
            renamed = replace(renamed, updated_at_ms=now_ms())
            entry = replace(_new_entry(), payload=dump_records([codes_created_record(project_id, owner, [renamed])]))
            keys = [k.affiliate_codes(), k.code_names(), k.owner_codes(owner), k.code(old), k.code_uses(old),
                    k.code(name), k.code_uses(name)]  # fmt: skip
            earlier = [fields.get(field, "") for field in ("names", "proof", "updated_ms", "pending")]
            undo_args = [owner_field, old, name, *earlier]
            undo = self._outbox_undo(k, entry, self._scripts.undo_rename_affiliate_code, keys, undo_args)
            args = [owner_field, old, name, _json(proof), renamed.updated_at_ms]
            result = await self._outbox_write(k, entry, self._scripts.rename_affiliate_code, keys, args, undo)
            if result == "code_in_use":
                raise CodeInUse()
            if result == "renamed":
                break
        else:
            raise StateChanging(f"the affiliate code of {owner_field} kept changing ({k.project_id})")
        records = await self._read_codes(k, [name])
        async with self._published(k, entry, undo, records[0] if records else renamed) as change:
            yield change

    async def set_rebate_rate(
        self, project_id: str, owner: User, code: str, rebate_rate: Decimal | None, proof: dict
    ) -> CodeRecord:
        k, name = ProjectKeys(project_id), normalize_code(code)
        for _ in range(_ATTEMPTS):  # again if the code was renamed between its lookup and the change
            current, record, _ = await self._code_by_name(k, name)
            if record is None or record.owner != owner:
                raise AffiliateCodeNotFound("The user has no such code")
            args = [user_field(owner), _rate_text(rebate_rate), _json(proof), now_ms()]
            if await self._scripts.set_rebate_rate(keys=[k.code(current)], args=args) == 1:
                return (await self._read_codes(k, [current]))[0]
        raise StateChanging(f"referral code {name} kept changing")

    @asynccontextmanager
    async def remove_referral(self, project_id: str, user: User, code: str, referrer: User):
        k, user_key = ProjectKeys(project_id), user_field(user)
        for _ in range(_ATTEMPTS):  # the script re-checks that the referral is still the one read
            edge_text = await self._redis.hget(k.referrals(), user_key)
            edge = None if edge_text is None else json.loads(edge_text)
            if edge is None or parse_user_field(edge["by"]) != referrer:
                raise ReferralNotFound("Referral not found")
            names = [normalize_code(code), edge["code"]]  # resolved at once: a rename moves both or neither
            now = await self._redis.hmget(k.code_names(), names)
            named, through = (current or name for current, name in zip(now, names, strict=True))
            if through != named:
                raise ReferralNotFound("Referral not found")
            record = referral_removed_record(
                project_id, uuid.uuid4().hex, edge.get("use", ""), edge["code"], referrer, user, edge["at"], now_ms()
            )
            entry = replace(_new_entry(record.id), payload=dump_records([record]))
            edge_keys, edge_args = [k.referrals(), k.referral_removals()], [user_key, edge_text]
            undo = self._outbox_undo(k, entry, self._scripts.undo_remove_referral, edge_keys, edge_args)
            writing = (self._scripts.remove_referral, edge_keys, edge_args)
            if await self._outbox_write(k, entry, *writing, undo) == "removed":
                break
        else:
            raise StateChanging(f"the referral of {user_key} kept changing ({k.project_id})")
        removal_keys = [k.outbox(), k.outbox_records(), k.referral_removals()]
        published = partial(self._scripts.referral_removal_published, keys=removal_keys, args=[entry.id, user_key])
        async with self._published(k, entry, undo, Referral(through, referrer, edge["at"]), published) as change:
            yield change

    async def referrals_among(self, project_id: str, users: Sequence[User]) -> dict[User, Referral]:
        users = list(dict.fromkeys(users))
        if not users:
            return {}
        k = ProjectKeys(project_id)
        edges = await self._redis.hmget(k.referrals(), [user_field(u) for u in users])
        found = {u: json.loads(edge) for u, edge in zip(users, edges, strict=True) if edge is not None}
        names = list(dict.fromkeys(edge["code"] for edge in found.values()))
        current = dict(zip(names, await self._redis.hmget(k.code_names(), names), strict=True)) if names else {}
        return {
            u: Referral(current[edge["code"]] or edge["code"], parse_user_field(edge["by"]), edge["at"])
            for u, edge in found.items()
        }

    async def rebate_rates(self, project_id: str, codes: Sequence[str]) -> dict[str, Decimal]:
        codes = list(dict.fromkeys(codes))
        if not codes:
            return {}
        k = ProjectKeys(project_id)
        async with self._redis.pipeline(transaction=False) as pipe:  # one slot: the project's
            for code in codes:
                pipe.hget(k.code(code), "rebate_rate")
            rates = await pipe.execute()
        return {code: Decimal(rate) for code, rate in zip(codes, rates, strict=True) if rate is not None}


def _rate(rate: Decimal | None) -> Decimal | None:
    """A rebate rate as it reads back from Redis (its text)."""
    return None if rate is None else Decimal(format_amount(rate))


def _rate_text(rate: Decimal | None) -> str:
    return "" if rate is None else format_amount(rate)


async def open_redis_state(
    url: str, settings: Settings | None = None, archive: DedupArchive | None = None
) -> RedisStateStore:
    settings = settings or Settings()
    # No automatic retries: a script re-sent after a lost reply could apply twice (lost replies are undone instead).
    redis = await open_redis(url, settings, decode_responses=True, retry=Retry(NoBackoff(), 0))
    return RedisStateStore(
        redis,
        dedup_window_s=settings.dedup_window,
        hot_window_s=settings.dedup_hot_window,
        idempotency_ttl_s=settings.idempotency_ttl,
        archive=archive,
    )


def _affiliate_json(a: Affiliate) -> str:
    return _json(stored_attributes(a))


def _affiliate(user: User, document: str) -> Affiliate:
    return stored_affiliate(user, json.loads(document))


def _code_record(code: str, fields: dict[str, str], uses: list[str]) -> CodeRecord | None:
    if not fields:
        return None
    max_uses, rate, updated = fields.get("max_uses"), fields.get("rebate_rate"), fields.get("updated_ms")
    return CodeRecord(
        code=code,
        owner=parse_user_field(fields["owner"]),
        created_at_ms=int(fields["created_ms"]),
        max_uses=None if max_uses is None else int(max_uses),
        current_uses=int(fields["current_uses"]),
        used_by=sorted((_code_use(use) for use in uses), key=lambda use: use.used_at_ms),
        chosen=fields.get("chosen") == "1",
        rebate_rate=None if rate is None else Decimal(rate),
        names=tuple(sorted(json.loads(fields.get("names") or "[]"))),
        updated_at_ms=None if updated is None else int(updated),
    )


def _code_use(document: str) -> CodeUse:
    use = json.loads(document)
    user = parse_user_field(use["user"])
    return CodeUse(user.identifier, user.identifier_type, use["at"])


def _draw_codes(quantity: int, keep: Sequence[str] = ()) -> list[str]:
    """`quantity` distinct candidate codes: `keep`, then new ones."""
    codes = list(dict.fromkeys(keep))
    while len(codes) < quantity:
        code = generate_code()
        if code not in codes:
            codes.append(code)
    return codes


def _code_use_record(project_id: str, use_id: str, record: CodeRecord, user: User, used_at: int) -> CodeUseRecord:
    return CodeUseRecord(
        project_id=project_id, use_id=use_id, code=record.code,
        owner_identifier=record.owner.identifier, owner_identifier_type=record.owner.identifier_type,
        user_identifier=user.identifier, user_identifier_type=user.identifier_type, used_at_ms=used_at,
        max_uses=record.max_uses,
    )  # fmt: skip


def _owned_check(raw: str | None, check_id: str, owner: User | None) -> ClaimCheck:
    check = None if raw is None else from_record(ClaimCheckRecord.model_validate_json(raw))
    if check is None or (owner is not None and check.user != owner):
        raise ClaimCheckNotFound(f"claim check {check_id} not found")
    return check
