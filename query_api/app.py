"""The query side: dashboards' reads from the warehouse's materialized views."""

from query_api.affiliate_portal.router import router as affiliate_portal_router
from query_api.affiliates.router import router as affiliates_router
from query_api.approvals.router import router as approvals_router
from query_api.claim_checks.router import pending as pending_acceptance_router
from query_api.claim_checks.router import router as claim_checks_router
from query_api.claimable.router import router as claimable_router
from query_api.console.router import pages as console_pages
from query_api.console.router import router as console_router
from query_api.exports.router import router as exports_router
from query_api.incentives.router import router as incentives_router
from query_api.leaderboards.router import payout_boards as payout_boards_router
from query_api.leaderboards.router import router as leaderboards_router
from query_api.payouts.router import router as payouts_router
from query_api.user_payouts.router import router as user_payouts_router

ROUTERS = [
    payouts_router,
    payout_boards_router,
    leaderboards_router,
    user_payouts_router,
    incentives_router,
    affiliates_router,
    affiliate_portal_router,
    claim_checks_router,
    pending_acceptance_router,
    approvals_router,
    claimable_router,
    exports_router,
    console_router,
    console_pages,
]
