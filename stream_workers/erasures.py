"""Carrying out erasures (API.md §11): the pending requests of every project taken in one batch, the writers held
still, the warehouse then the state store rewritten, the requests marked done.

Held, because the warehouse's rewrite copies each table and swaps the copy in (rewards.adapters.warehouse_erasure):
a delivery written between the two would be lost. Everything accepted before the batch began is erased: the embedded
default rewrites the outbox's pending records too (so they are written under the pseudonym); the production shape
first waits until the workers have written everything the log held when the batch began (`caught_up`). What is
accepted after is new: a user erased who comes back is a new user under their identifier.

A round first rewrites the warehouse (a sharded one is refused before anything is copied), then the state store; one
that fails is retried whole later (each step is idempotent: a user already renamed is found nowhere), and is logged
and counted; its requests stay pending. A request made once a round has taken the user's is a new request, for the
next round: what was written in between is erased too.
"""

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, suppress

import structlog
from prometheus_client import Counter, Histogram

from rewards.domain.erasure import Erasure
from rewards.domain.payouts import User
from rewards.ports import ErasureStore, WritersHeldElsewhere

log = structlog.get_logger(__name__)

BATCH = 1000  # users erased per round: the warehouse's cost is per round (each table copied once), not per user
INTERVAL_S = 2.0  # between looks at the requests when none is pending
BACKOFF_MAX_S = 600.0  # a round failing again and again is retried at most this far apart

ERASED = Counter("rewards_erasures_total", "Users erased (API.md §11)")
FAILURES = Counter("rewards_erasure_failures_total", "Erasure rounds that failed (retried at the next round)")
SECONDS = Histogram(
    "rewards_erasure_seconds", "Time of one erasure round, writers held", buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 300)
)

Hold = Callable[[], AbstractAsyncContextManager]
CaughtUp = Callable[[], Awaitable[None]]
# The warehouse's half (rewards.adapters.warehouse_erasure.erase_users over the process's warehouse, given by the
# composition root): each (project, user) of a round renamed to its pseudonym, `before_swap` awaited before each
# table's swap (it raises if the writers are no longer held); the tables rewritten.
EraseWarehouse = Callable[[Mapping[tuple[str, User], User], Callable[[], Awaitable[None]] | None], Awaitable[list[str]]]


async def _nothing_to_wait_for() -> None:
    return None


async def erase_pending(
    state: ErasureStore, erase_warehouse: EraseWarehouse, hold: Hold, caught_up: CaughtUp = _nothing_to_wait_for
) -> int:
    """One round: up to BATCH pending erasures taken and carried out; how many."""
    taken = await state.take_erasures(BATCH)
    if not taken:
        return 0
    await caught_up()
    started = time.monotonic()
    async with hold() as held:
        # Another process may have finished some of them while this one waited for the log and the hold.
        pending = [e for e in taken if await state.erasure_status(e.project_id, e.id) == "pending"]
        if not pending:
            return 0
        tables = await erase_warehouse(
            {(e.project_id, e.user): e.pseudonym for e in pending}, getattr(held, "confirm", None)
        )
        for project_id, renames in _by_project(pending).items():
            await state.erase_users(project_id, renames)
    await state.finish_erasures(pending)
    SECONDS.observe(time.monotonic() - started)
    ERASED.inc(len(pending))
    log.info("users erased", users=len(pending), tables=len(tables), seconds=round(time.monotonic() - started, 3))
    return len(pending)


async def run_erasures(
    state: ErasureStore,
    erase_warehouse: EraseWarehouse,
    hold: Hold,
    stop: asyncio.Event,
    caught_up: CaughtUp = _nothing_to_wait_for,
    gap_s: float = 0.0,
) -> None:
    """Rounds as long as `stop` is not set: one as soon as a request is pending, the next `gap_s` after it at the
    earliest (each round holds the writers: a stream of requests costs a stall per `gap_s`, not one per request); a
    round that fails is retried after 2 s, then twice as long each time, up to BACKOFF_MAX_S."""
    backoff = INTERVAL_S
    while not stop.is_set():
        wait = INTERVAL_S
        try:
            if await erase_pending(state, erase_warehouse, hold, caught_up):
                wait = gap_s
            backoff = INTERVAL_S
        except WritersHeldElsewhere:  # another worker process's round runs: this one's turn comes later
            pass
        except Exception:  # retried later: the requests stay pending
            FAILURES.inc()
            log.exception("erasure round failed; retrying", retry_in_s=backoff)
            wait, backoff = backoff, min(backoff * 2, BACKOFF_MAX_S)
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(wait, 0.01))


def _by_project(pending: list[Erasure]) -> dict[str, dict[User, User]]:
    grouped: dict[str, dict[User, User]] = defaultdict(dict)
    for e in pending:
        grouped[e.project_id][e.user] = e.pseudonym
    return grouped
