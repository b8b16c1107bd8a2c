"""The query side: dashboards' reads from the warehouse's materialized views."""

from query_api.affiliates.router import router as affiliates_router
from query_api.claim_checks.router import router as claim_checks_router
from query_api.payouts.router import router as payouts_router

ROUTERS = [payouts_router, affiliates_router, claim_checks_router]
