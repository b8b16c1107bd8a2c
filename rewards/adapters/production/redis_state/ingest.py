"""IngestStore on Redis: the claim of a batch's dedup ids and Idempotency-Key, and what became of each event. Until its
block ends (the package says why a change is seen before), concurrent readers see:

- ingest: claims are *pending* until the block exits, and pending ids read as not found; an
  overlapping request gets BatchInFlight until then (at most PENDING_TTL_S).

A claim's token names the process that made it (`<epoch>.<uuid>`, the epoch drawn at each start). An ingest process
killed mid-batch leaves its claims pending; once its restarted successor has fenced its Kafka transactions (final
then: committed or aborted) and the workers have written everything up to that point, the successor retires the dead
epoch (runtime.wiring.retire_predecessor), and a request meeting a claim of a retired epoch takes it over at once:
the claim's events were written if they were published, so the archive's check of the fresh ids finds them, and
otherwise they are new. Without this, a producer retrying the batch met 503s until the claims lapsed (PENDING_TTL_S).
"""

import asyncio
import re
import secrets
import uuid
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import structlog
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from rewards.adapters.production import redis_keys
from rewards.adapters.production.redis_client import RedisClient, is_cluster
from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_state.archive_filter import ArchiveFilter
from rewards.adapters.production.redis_state.base import RedisStateBase, _applied, _ms, _try_undo
from rewards.domain.errors import IdempotencyKeyReused
from rewards.domain.payouts import User
from rewards.ports import DedupArchive, IngestClaim

log = structlog.get_logger(__name__)

PENDING_TTL_S = 60  # a claimed batch must be published and committed within this, or its claim lapses
IDEMPOTENCY_TTL_S = 24 * 3600
MARK_CHUNK = 1_000  # ids marked per script call
RETIRED_TTL_S = 2 * PENDING_TTL_S  # a retired epoch is remembered past the lapse of every claim it made
COMMIT_RETRIES_S = (0.05, 0.25, None)  # a batch's commit in Redis: the pause after each failed try (None: give up)
_KEY_KIND = re.compile(rf"{redis_keys.PREFIX}:{{[^}}]*}}:(dedup|user_events):")


class BatchInFlight(Exception):
    """Some events of the batch (or its Idempotency-Key) are claimed by another request not yet finished:
    nothing was accepted; a retry shortly after succeeds (as a duplicate or a replay). HTTP: 503."""

    def __init__(self, dedup_ids: list[str]):
        super().__init__(f"{len(dedup_ids)} event(s) of the batch are being accepted by another request")
        self.dedup_ids = dedup_ids


@asynccontextmanager
async def _undo_on_raise(undo: Callable[[], Awaitable[Any]]):
    """Run `undo` if the block raises (a failed publication must leave no trace), then re-raise."""
    try:
        yield
    except BaseException:
        await _try_undo(undo)
        raise


class RedisIngestStore(RedisStateBase):
    """The production adapter of rewards.ports.IngestStore (the one port with settings of its own).

    Dedup windows: an accepted id is kept for `dedup_window_s`; once processed or failed, for `hot_window_s`
    (never past its window; None: the whole window). With an `archive` (the warehouse's `dedup_ids`), ids Redis
    no longer knows are asked of it, once per batch and only for the ids the claim found fresh, so Redis holds
    only the hot window (and a batch retried after Redis lost its last second is still found known once
    written); the project's archive filter (redis_state.archive_filter) rules most of those ids out first, so only
    its maybes are asked (`archive_filter`: its margins; tests shorten them). Every production process opens it with
    the hot window: the ingest edge with the archive, the workers (which mark ids processed, feeding the filter) ask
    the warehouse themselves. A user's event names live a window after their last event; Idempotency-Key records
    `idempotency_ttl_s`."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        dedup_window_s: float = 35 * 86400,
        hot_window_s: float | None = None,
        idempotency_ttl_s: float = IDEMPOTENCY_TTL_S,
        archive: DedupArchive | None = None,
        archive_filter: dict | None = None,
    ):
        super().__init__(redis)
        self.epoch = secrets.token_hex(6)  # this process's: every claim it makes names it
        self._archive = archive
        self._window_s = dedup_window_s
        hot = dedup_window_s if hot_window_s is None else min(hot_window_s, dedup_window_s)
        self._window_ms, self._hot_ms, self._idempotency_ms = _ms(dedup_window_s), _ms(hot), _ms(idempotency_ttl_s)
        self._filter = ArchiveFilter(self._scripts, archive, dedup_window_s, **(archive_filter or {}))

    @asynccontextmanager
    async def ingest(
        self,
        project_id: str,
        dedup_ids: list[str],
        users_and_names: list[tuple[User, str]],
        idempotency: tuple[str, str] | None,
    ):
        k, token = ProjectKeys(project_id), f"{self.epoch}.{uuid.uuid4().hex}"
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
        """Ids the hot window did not know but the archive does are duplicates: release their claims. Only the archive
        filter's maybes are asked (all of them where it is not trusted)."""
        if self._archive is None or not claim.fresh:
            return
        maybes = await self._filter.maybes(project_id, [dedup_ids[i] for i in claim.fresh])
        known = await self._archive.known_among(project_id, maybes, self._window_s) if maybes else {}
        if known:
            await self._scripts.release_claims(keys=[k.dedup(d) for d in known], args=[token])
            claim.fresh = [i for i in claim.fresh if dedup_ids[i] not in known]

    async def _claim_batch(
        self, idem: str, dedup_keys: list[str], dedup_ids: list[str], token: str, idempotency: tuple[str, str] | None
    ) -> IngestClaim:
        body_hash = "" if idempotency is None else idempotency[1]
        args = [token, _ms(PENDING_TTL_S), "0" if idempotency is None else "1", body_hash]
        result = await self._scripts.claim_batch(keys=[idem, *dedup_keys], args=args)
        if result[0] == "busy" and await self._take_over_retired(idem, dedup_keys, result[2]):
            result = await self._scripts.claim_batch(keys=[idem, *dedup_keys], args=args)
        match result[0]:
            case "conflict":
                raise IdempotencyKeyReused("Idempotency-Key has already been used with a different body")
            case "replay":
                return IngestClaim(replay=result[1].encode())
            case "busy":
                raise BatchInFlight([dedup_ids[i] for i in result[1]])
        return IngestClaim(fresh=list(result[1]))

    async def _take_over_retired(self, idem: str, dedup_keys: list[str], tokens: list[str]) -> bool:
        """Release the claims of `tokens` (the batch's other claimants) if every one was made by a retired process:
        True when they were (the claim may then be made again)."""
        epochs = {token.partition(".")[0] for token in tokens}
        if not tokens or "" in tokens or not all(await asyncio.gather(*(self._retired(e) for e in epochs))):
            return False
        for token in tokens:
            await self._scripts.abort_batch(keys=[idem, *dedup_keys], args=[token])
        log.info("claims of a retired ingest process taken over", epochs=sorted(epochs))
        return True

    async def _retired(self, epoch: str) -> bool:
        return bool(epoch) and await self._redis.exists(redis_keys.retired_epoch(epoch)) == 1

    async def take_over_owner(self, owner: str) -> str | None:
        """Record this process as `owner`'s current one (its Kafka transactional ids): the epoch of the process that
        was it before (the one this process fenced), if any."""
        return await self._redis.set(redis_keys.ingest_owner(owner), self.epoch, get=True)

    async def retire_epoch(self, epoch: str) -> None:
        """The process of `epoch` is dead, its transactions are final and the workers wrote everything it published:
        its pending claims may be taken over."""
        await self._redis.set(redis_keys.retired_epoch(epoch), "1", ex=RETIRED_TTL_S)

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
        """In calls of MARK_CHUNK ids: a script blocks Redis while it runs (~20 µs an id with the filter's bits), and
        a worker's delivery marks up to 10,000."""
        k = ProjectKeys(project_id)
        for start in range(0, len(dedup_ids), MARK_CHUNK):
            chunk = dedup_ids[start : start + MARK_CHUNK]
            keys = [k.archive_filter(), *(k.dedup(d) for d in chunk)]
            args = [status, self._hot_ms, *self._filter.mark_args(chunk)]
            await self._scripts.mark_processed(keys=keys, args=args)

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

    async def close(self) -> None:
        await super().close()
        if self._archive is not None:
            await self._archive.close()
