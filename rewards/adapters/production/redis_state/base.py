"""What the Redis adapter's port classes share: RedisStateBase (the client and its scripts, the outbox of the changes
the warehouse must learn of), the undo of a change whose reply is lost, and the errors of optimistic updates.

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
"""

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from rewards.adapters.production import redis_keys
from rewards.adapters.production.redis_client import RedisClient
from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_scripts import Scripts
from rewards.domain.timestamps import now_ms
from rewards.ports import Change

log = structlog.get_logger(__name__)
_T = TypeVar("_T")

_ATTEMPTS = 20  # optimistic retries (a script's re-check found a change) before giving up
OUTBOX_DUE_S = 30  # an outbox entry is its request's this long (> a publish's longest wait), then the relay's
OUTBOX_TOUCH_FRESH_S = 20  # a change is written within this long of its touch of the relay's index (outbox_relay)


class StateChanging(Exception):
    """An optimistic update kept meeting concurrent changes and gave up."""


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


class RedisStateBase:
    """The client and the scripts registered on it, and the outbox of the changes the warehouse must learn of, which
    every port class of the Redis adapter builds on."""

    def __init__(self, redis: RedisClient):
        self._redis = redis
        self._scripts = Scripts.register(redis)

    # -- the outbox of the changes (outbox_relay publishes what their requests did not) ---------------------------

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

    @property
    def redis(self) -> RedisClient:
        """The store's client (shared by what keeps state beside it: rewards.adapters.production.writer_hold)."""
        return self._redis

    async def ping(self) -> None:
        await self._redis.ping()

    async def close(self) -> None:
        await self._redis.aclose()
