"""Claim check expiry (API.md §8): a closed check not claimed by its `expires_at` becomes `expired`, and its amount
goes back to its currency's budget. A sweep, every `REWARDS_CLAIM_EXPIRY_SWEEP_S`, in every process that serves the
ingest edge (`rewards serve`, `rewards ingest-api`): what it must do is in the warehouse and the state store, so a
restart loses nothing, and sweeps running at once in several processes change each check once.

Each due check: the state store makes it `expired` (only a check still closed and past its time: one claimed since
is left as it is) with the record of its new state, published like every claim check change (the warehouse then
shows it expired and the sweep no longer finds it); then its units go back to the budget, once per check
(AllotmentStore.release). A crash between the two leaves the budget short of that amount (never over it)."""

import asyncio
from functools import partial

import structlog
from prometheus_client import Counter

from rewards.domain import claim_checks
from rewards.domain.allotment import currency_key
from rewards.domain.claim_checks import EXPIRED, ClaimCheckNotFound
from rewards.domain.timestamps import now_ms
from rewards.ports import EventLog, StateStore, Warehouse
from schemas.clickhouse.values import ch_datetime

log = structlog.get_logger(__name__)
EXPIRED_CHECKS = Counter("rewards_claim_checks_expired_total", "Claim checks expired by the sweep")
SWEEP_FAILURES = Counter("rewards_claim_expiry_sweep_failures_total", "Claim check expiry sweeps that failed")
SWEEP_LIMIT = 1000  # checks per project and sweep: the rest wait for the next one

# The closed checks past their time, each one's latest version (FINAL) among those whose versions say so (the inner
# scan reads two columns of the table, FINAL only the few checks it names), at most `limit` per project: a project
# whose checks cannot be expired (deleted since) never holds up another's.
DUE = """
SELECT project_id, groupArray({limit:UInt32})(id) AS ids FROM (
    SELECT project_id, id FROM claim_checks FINAL
    WHERE (project_id, id) IN (
        SELECT project_id, id FROM claim_checks WHERE status = 'closed' AND expires_at <= {now:DateTime64(3, 'UTC')}
    ) AND status = 'closed' AND expires_at <= {now:DateTime64(3, 'UTC')}
    ORDER BY expires_at
)
GROUP BY project_id
"""


async def expire_due(state: StateStore, event_log: EventLog, warehouse: Warehouse, now: int) -> int:
    """Expire the checks due at `now` (at most SWEEP_LIMIT per project); returns how many this call expired."""
    expired = 0
    for row in await warehouse.query(DUE, {"now": ch_datetime(now), "limit": SWEEP_LIMIT}):
        if await state.project_exists(row["project_id"]):
            expired += await _expire(state, event_log, row["project_id"], list(row["ids"]), now)
    return expired


async def _expire(state: StateStore, event_log: EventLog, project_id: str, ids: list[str], now: int) -> int:
    known = {check.id: check for check in await state.get_claim_checks(project_id, ids)}
    closed = [check_id for check_id in ids if check_id in known and known[check_id].status != EXPIRED]
    if not closed:
        return 0
    try:
        async with state.update_claim_checks(project_id, closed, partial(claim_checks.expire, now_ms=now), None) as c:
            await event_log.publish(project_id, c.payload)
    except ClaimCheckNotFound:  # the project was deleted meanwhile
        return 0
    expired = 0
    for check in c.value:
        was = known[check.id]
        if check.status == EXPIRED and was.status != EXPIRED:
            await state.release(project_id, check.id, currency_key(check.currency), check.amount)
            expired += 1
    EXPIRED_CHECKS.inc(expired)
    if expired:
        log.info("claim checks expired", project_id=project_id, checks=expired)
    return expired


async def run_sweeps(state: StateStore, event_log: EventLog, warehouse: Warehouse, every_s: float) -> None:
    """Sweep every `every_s` until cancelled; a failed sweep is counted and logged, and the next one tries again."""
    while True:
        await asyncio.sleep(every_s)
        try:
            await expire_due(state, event_log, warehouse, now_ms())
        except Exception:
            SWEEP_FAILURES.inc()
            log.exception("claim check expiry sweep failed")
