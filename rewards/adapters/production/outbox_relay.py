"""The outbox relay: publishes the state changes whose request did not, so Redis and the warehouse never disagree
for good.

Every change the warehouse must learn of (codes, code uses, affiliates, claim checks) writes, in the same Lua
script, an entry of its project's outbox: the message its request then publishes, and deletes once published
(rewards.adapters.production.redis_state). An entry still there once due (OUTBOX_DUE_S after its write, or at once after
a publish that may have gone through) is this relay's: its request died, or failed after the log may have taken
it. Each ingest-api process of the production shape runs one relay (runtime.production), every INTERVAL_S:

- it reads the index of projects (`rw:outbox_projects`, touched by every change before its script runs);
- per project, one script leases up to BATCH due entries (each due again LEASE_S later: a relay that dies
  with them leaves them to another), which it publishes and, once published, deletes; an entry whose publish
  fails stays, for the next lease. Several relays (processes) may run: a lease keeps them apart, and a message
  published twice (by its request and the relay, or a relay that died before deleting) is dropped by the workers;
- a project whose outbox is empty and that nobody touched for IDLE_S leaves the index, by a compare-and-remove.

Why removing a project from the index never orphans an entry (an entry of a project the relay no longer reads):
the relay removes a project only if, when it read the index at Redis time R, the project's last touch S was older
than R - IDLE_S, then found its outbox empty, and its score is still S when it removes it. A change touches the
index (ZADD GT: the score only grows) and then writes its entry with a script that refuses to write once
OUTBOX_TOUCH_FRESH_S has passed since its touch T (the change touches again and retries). A touch after the
relay's read would have T >= R > S and raised the score: no removal. A touch before it has T <= S, so its entry
was written by T + OUTBOX_TOUCH_FRESH_S < R: before the relay read the outbox, which therefore held it unless it
was already published or undone. (Times are Redis server times; on a Redis Cluster, the nodes' clocks must agree
within IDLE_S - OUTBOX_TOUCH_FRESH_S.)
"""

import asyncio
import contextlib

import structlog
from prometheus_client import Counter, Gauge
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from rewards.adapters.production import redis_keys
from rewards.adapters.production.redis_client import RedisClient, open_redis
from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_scripts import Scripts
from rewards.adapters.production.redis_state.base import OUTBOX_TOUCH_FRESH_S
from rewards.ports import EventLog
from rewards.settings import Settings

log = structlog.get_logger(__name__)

INTERVAL_S = 1.0  # between two passes
BATCH = 100  # entries leased per project and pass at most
LEASE_S = 30  # a leased entry is due again after this (> a publish's longest wait, see kafka_log)
IDLE_S = 60  # a project with an empty outbox leaves the index once untouched this long
assert IDLE_S > 2 * OUTBOX_TOUCH_FRESH_S  # the margin left for the clocks of Redis Cluster nodes (see above)

RELAYED = Counter("rewards_outbox_relayed_total", "Outbox entries published by the relay (their request did not).")
FAILURES = Counter("rewards_outbox_relay_failures_total", "Outbox entries the relay failed to publish (retried).")
BACKLOG = Gauge("rewards_outbox_backlog", "Outbox entries found due at the relay's last pass, over all projects.")


class OutboxRelay:
    def __init__(self, redis_url: str, event_log: EventLog, settings: Settings | None = None):
        self._url, self._settings = redis_url, settings
        self._redis: RedisClient | None = None  # opened by the first pass (open_redis may ask the server what it is)
        self._scripts: Scripts | None = None
        self._log = event_log
        self._task: asyncio.Task | None = None

    @classmethod
    def open(cls, redis_url: str, event_log: EventLog, settings: Settings | None = None) -> "OutboxRelay":
        """The relay of the Redis at `redis_url` (one node or a cluster, by REDIS_CLUSTER), connected by its first
        pass."""
        return cls(redis_url, event_log, settings)

    async def _connected(self) -> Scripts:
        if self._scripts is None:
            # No automatic retries, as the state store: a lease re-sent after a lost reply would lease twice.
            options = {"decode_responses": True, "retry": Retry(NoBackoff(), 0)}
            self._redis = await open_redis(self._url, self._settings, **options)
            self._scripts = Scripts.register(self._redis)
        return self._scripts

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        """Stop (an entry leased and not yet published is published after its lease, by any relay)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._redis is not None:
            await self._redis.aclose()

    async def _run(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:  # Redis unreachable, say: the next pass tries again
                log.exception("outbox_relay_pass_failed")
            await asyncio.sleep(INTERVAL_S)

    async def run_once(self) -> int:
        """One pass over every project of the index; returns how many entries it published."""
        scripts = await self._connected()
        now, flat = await scripts.outbox_index(keys=[redis_keys.outbox_projects()])
        relayed = backlog = 0
        for project_id, touched in zip(flat[::2], flat[1::2], strict=True):
            total, due, *taken = await scripts.outbox_lease(keys=_outbox(project_id), args=[BATCH, int(LEASE_S * 1000)])
            backlog += due
            relayed += await self._publish(project_id, dict(zip(taken[::2], taken[1::2], strict=True)))
            if total == 0 and float(touched) < now - IDLE_S * 1000:
                await scripts.outbox_forget_project(keys=[redis_keys.outbox_projects()], args=[project_id, touched])
        BACKLOG.set(backlog)
        return relayed

    async def _publish(self, project_id: str, entries: dict[str, str]) -> int:
        """Publish the leased `entries` (id → message) together, and delete those published."""
        if not entries:
            return 0
        outcomes = await asyncio.gather(
            *(self._log.publish(project_id, message.encode()) for message in entries.values()), return_exceptions=True
        )
        published = [entry for entry, outcome in zip(entries, outcomes, strict=True) if outcome is None]
        for entry, outcome in zip(entries, outcomes, strict=True):
            if outcome is not None:
                FAILURES.inc()
                log.warning("outbox_relay_publish_failed", project_id=project_id, entry=entry, error=repr(outcome))
        if published:
            await self._scripts.outbox_delete(keys=_outbox(project_id), args=published)
            RELAYED.inc(len(published))
            log.info("outbox_relayed", project_id=project_id, entries=len(published))
        return len(published)


def _outbox(project_id: str) -> list[str]:
    k = ProjectKeys(project_id)
    return [k.outbox(), k.outbox_records()]
