"""The query side: dashboards' reads from the warehouse's materialized views."""

from query_api.payouts.router import router as payouts_router

ROUTERS = [payouts_router]
