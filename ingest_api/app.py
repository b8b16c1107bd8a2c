"""The ingest edge: events, referral codes, project configuration, blocklist and budgets, affiliate registration, claim
check changes, erasures."""

from ingest_api.acceptance.router import router as acceptance_router
from ingest_api.affiliates.router import router as affiliates_router
from ingest_api.approvals.router import router as approvals_router
from ingest_api.blocklist.router import router as blocklist_router
from ingest_api.budgets.router import router as budgets_router
from ingest_api.claim_checks.router import router as claim_checks_router
from ingest_api.dead_letters.router import router as dead_letters_router
from ingest_api.erasures.router import router as erasures_router
from ingest_api.events.router import router as events_router
from ingest_api.projects.router import router as projects_router
from ingest_api.referral_codes.router import router as referral_codes_router
from ingest_api.referral_codes.router import user_router
from ingest_api.reversals.router import router as reversals_router
from ingest_api.webhooks.router import router as webhooks_router

ROUTERS = [
    events_router,
    reversals_router,
    referral_codes_router,
    projects_router,
    blocklist_router,
    budgets_router,
    affiliates_router,
    claim_checks_router,
    acceptance_router,
    approvals_router,
    webhooks_router,
    dead_letters_router,
    erasures_router,
    user_router,
]
