"""Each adapter is a class for each port it serves (docs/architecture.md, "Where a change lands"): each class has its
port's methods, and the adapter's StateStore is all of them."""

import pytest

from rewards.adapters.embedded import sqlite_state
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
from rewards.adapters.production import redis_state
from rewards.adapters.production.redis_state.affiliates import RedisAffiliateStore
from rewards.adapters.production.redis_state.allotment import RedisAllotmentStore
from rewards.adapters.production.redis_state.approvals import RedisApprovalStore
from rewards.adapters.production.redis_state.claim_checks import RedisClaimCheckStore
from rewards.adapters.production.redis_state.erasures import RedisErasureStore
from rewards.adapters.production.redis_state.ingest import RedisIngestStore
from rewards.adapters.production.redis_state.integrity import RedisIntegrityStore
from rewards.adapters.production.redis_state.projects import RedisProjectStore
from rewards.adapters.production.redis_state.referrals import RedisReferralStore
from rewards.adapters.production.redis_state.reversals import RedisReversalStore
from rewards.adapters.production.redis_state.tracking import RedisTrackingStore
from rewards.adapters.production.redis_state.webhook_queue import RedisWebhookQueue
from rewards.adapters.production.redis_state.webhooks import RedisWebhookStore
from rewards.ports import (
    AffiliateStore,
    AllotmentStore,
    ApprovalStore,
    ClaimCheckStore,
    ErasureStore,
    IngestStore,
    IntegrityStore,
    ProjectStore,
    ReferralStore,
    ReversalStore,
    TrackingStore,
    WebhookQueue,
    WebhookStore,
)
from tests.contract.support import assert_implements

PORTS = [
    ProjectStore, AffiliateStore, ReferralStore, IngestStore, ClaimCheckStore, TrackingStore, IntegrityStore,
    AllotmentStore, ReversalStore, ApprovalStore, WebhookStore, WebhookQueue, ErasureStore,
]  # fmt: skip
ADAPTERS = {
    sqlite_state.SqliteStateStore: [SqliteProjectStore, SqliteAffiliateStore, SqliteReferralStore, SqliteIngestStore,
                                    SqliteClaimCheckStore, SqliteTrackingStore, SqliteIntegrityStore,
                                    SqliteAllotmentStore, SqliteReversalStore, SqliteApprovalStore,
                                    SqliteWebhookStore, SqliteWebhookQueue, SqliteErasureStore],
    redis_state.RedisStateStore: [RedisProjectStore, RedisAffiliateStore, RedisReferralStore, RedisIngestStore,
                                  RedisClaimCheckStore, RedisTrackingStore, RedisIntegrityStore, RedisAllotmentStore,
                                  RedisReversalStore, RedisApprovalStore, RedisWebhookStore, RedisWebhookQueue,
                                  RedisErasureStore],
}  # fmt: skip


@pytest.mark.parametrize(
    ("adapter", "port"),
    [(adapter, port) for classes in ADAPTERS.values() for adapter, port in zip(classes, PORTS, strict=True)],
    ids=lambda cls: cls.__name__,
)
def test_each_class_has_its_port(adapter: type, port: type):
    assert_implements(adapter, port)


@pytest.mark.parametrize("store", list(ADAPTERS), ids=lambda cls: cls.__name__)
def test_the_state_store_is_every_class_of_its_adapter(store: type):
    assert all(issubclass(store, cls) for cls in ADAPTERS[store])
