"""StateStore on Redis (redis-py's asyncio client): the production adapter of Redis's role, a class for each port (a
module each: projects.py, affiliates.py, …, webhooks.py, webhook_queue.py) over a shared base (base.py: the client, its
scripts, the outbox); RedisStateStore is all of them on one client.

Behaves as SqliteStateStore (the reference), with one difference in shape: a SQLite transaction can
stay open while the block publishes, a Redis change cannot. So each context manager applies its
change on entry and undoes it if the block raises; until the undo, concurrent readers can see it (each port's
module says what). Lost replies and the outbox of the changes the warehouse must learn of: base.py.

The same code runs on one node and on a Redis Cluster (rewards.adapters.production.redis_client picks the client): every
script keeps to one project's slot, and nothing uses MULTI or WATCH.

Key layout: rewards.adapters.production.redis_keys; the Lua scripts: rewards.adapters.production.redis_scripts.
"""

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from rewards.adapters.production.redis_client import open_redis
from rewards.adapters.production.redis_state.affiliates import RedisAffiliateStore
from rewards.adapters.production.redis_state.allotment import RedisAllotmentStore
from rewards.adapters.production.redis_state.approvals import RedisApprovalStore
from rewards.adapters.production.redis_state.base import StateChanging
from rewards.adapters.production.redis_state.claim_checks import RedisClaimCheckStore
from rewards.adapters.production.redis_state.erasures import RedisErasureStore
from rewards.adapters.production.redis_state.ingest import BatchInFlight, RedisIngestStore
from rewards.adapters.production.redis_state.integrity import RedisIntegrityStore
from rewards.adapters.production.redis_state.projects import RedisProjectStore
from rewards.adapters.production.redis_state.referrals import RedisReferralStore
from rewards.adapters.production.redis_state.reversals import RedisReversalStore
from rewards.adapters.production.redis_state.tracking import RedisTrackingStore
from rewards.adapters.production.redis_state.webhook_queue import RedisWebhookQueue
from rewards.adapters.production.redis_state.webhooks import RedisWebhookStore
from rewards.ports import DedupArchive
from rewards.settings import Settings

__all__ = ["BatchInFlight", "RedisStateStore", "StateChanging", "open_redis_state"]


class RedisStateStore(
    RedisProjectStore,
    RedisAffiliateStore,
    RedisReferralStore,
    RedisIngestStore,
    RedisClaimCheckStore,
    RedisTrackingStore,
    RedisIntegrityStore,
    RedisAllotmentStore,
    RedisReversalStore,
    RedisApprovalStore,
    RedisWebhookStore,
    RedisWebhookQueue,
    RedisErasureStore,
):
    """The production adapter of rewards.ports.StateStore, so of each of its ports: ProjectStore, AffiliateStore,
    ReferralStore, IngestStore, ClaimCheckStore, TrackingStore, IntegrityStore, AllotmentStore, ReversalStore,
    ApprovalStore, WebhookStore, WebhookQueue and ErasureStore, each a class of this package, sharing one client.
    Its constructor is RedisIngestStore's (the one port with settings: the dedup windows and archive)."""


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
