"""StateStore on SQLite: the embedded stand-in for Redis, a class for each port (a module each: projects.py,
affiliates.py, …, webhooks.py, webhook_queue.py) over a shared base (base.py: the database); SqliteStateStore is all
of them on one database."""

from rewards.adapters.embedded.sqlite_state.affiliates import SqliteAffiliateStore
from rewards.adapters.embedded.sqlite_state.allotment import SqliteAllotmentStore
from rewards.adapters.embedded.sqlite_state.approvals import SqliteApprovalStore
from rewards.adapters.embedded.sqlite_state.claim_checks import SqliteClaimCheckStore
from rewards.adapters.embedded.sqlite_state.erasures import SqliteErasureStore
from rewards.adapters.embedded.sqlite_state.ingest import SqliteIngestStore
from rewards.adapters.embedded.sqlite_state.integrity import SqliteIntegrityStore
from rewards.adapters.embedded.sqlite_state.projects import SqliteProjectStore
from rewards.adapters.embedded.sqlite_state.referrals import SqliteReferralStore
from rewards.adapters.embedded.sqlite_state.reversals import SqliteReversalStore
from rewards.adapters.embedded.sqlite_state.tracking import SqliteTrackingStore
from rewards.adapters.embedded.sqlite_state.webhook_queue import SqliteWebhookQueue
from rewards.adapters.embedded.sqlite_state.webhooks import SqliteWebhookStore

__all__ = ["SqliteStateStore"]


class SqliteStateStore(
    SqliteProjectStore,
    SqliteAffiliateStore,
    SqliteReferralStore,
    SqliteIngestStore,
    SqliteClaimCheckStore,
    SqliteTrackingStore,
    SqliteIntegrityStore,
    SqliteAllotmentStore,
    SqliteReversalStore,
    SqliteApprovalStore,
    SqliteWebhookStore,
    SqliteWebhookQueue,
    SqliteErasureStore,
):
    """The reference adapter of rewards.ports.StateStore, so of each of its ports (ProjectStore, …, WebhookStore,
    WebhookQueue), each a class of this package, sharing one database. Its constructor is SqliteIngestStore's (the one
    port with settings: the dedup and Idempotency-Key windows)."""
