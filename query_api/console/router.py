"""The operator console: `GET /console`, a page for a browser (served at the root, outside the API), and the few reads
under `/api/v1/console` it needs beside the contract's endpoints (a project's pipeline health, its points by hour, its
claim checks as a whole). The page signs in with an API key, which it keeps in the tab's session storage and sends
as every client does (`Authorization: Bearer`); the page itself needs none, and holds nothing of any project."""

import hashlib
from functools import cache
from importlib import resources

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import HTMLResponse, Response

from query_api.console import service
from query_api.console.schemas import PipelineHealth, PointsByHour, ProjectChecks, ProjectIntegrity
from rewards.domain.timestamps import now_ms
from rewards.web.app import API_PREFIX, PageRouter
from rewards.web.dependencies import BackpressureDep, Caller, StateDep, WarehouseDep
from rewards.web.openapi import success

router = APIRouter(prefix="/console", tags=["console"])
pages = PageRouter(prefix="/console", include_in_schema=False)

STATIC = resources.files("query_api.console") / "static"
# The files the page loads, by name (nothing else is served: no path reaches the file system).
ASSETS = {
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "uPlot.iife.min.js": "text/javascript; charset=utf-8",
    "uPlot.min.css": "text/css; charset=utf-8",
}
# Everything the page loads comes from this server: a browser refuses any other origin, and any inline script.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


@router.get("/health", responses=success(PipelineHealth, "The project and its pipeline"))
async def health(principal: Caller, state: StateDep, warehouse: WarehouseDep, backpressure: BackpressureDep):
    """The project (its id and name) and its pipeline: events accepted and written per second, how long they waited
    to be written (freshness), the dead letters, and the event log's backlog (the whole pipeline's; null where this
    process does not measure it: the production query API)."""
    now = now_ms()
    minutes = await service.pipeline_minutes(warehouse, principal.project_id, now - service.DAY_MS)
    name = await service.project_name(state, principal.project_id)
    answer = {"project_id": principal.project_id, "project_name": name, **service.health(minutes, now)}
    answer["dead_letters"]["latest"] = await service.latest_dead_letters(warehouse, principal.project_id, 5)
    answer["backlog"] = {"scope": "pipeline", "messages": await service.backlog(backpressure)}
    return answer


@router.get("/points", responses=success(PointsByHour, "Points per hour"))
async def points(principal: Caller, warehouse: WarehouseDep, hours: int = Query(48, ge=1, le=720)):
    """Points paid per hour over the last `hours` hours (1-720), oldest first, every hour listed."""
    series = await service.points_by_hour(warehouse, principal.project_id, hours, now_ms())
    return {"hours": series}


@router.get("/claim-checks", responses=success(ProjectChecks, "The project's claim checks"))
async def claim_checks(principal: Caller, warehouse: WarehouseDep, limit: int = Query(10, ge=1, le=100)):
    """The project's claim checks per currency (open, closed and claimed amounts) and its newest claims (`limit`)."""
    return {
        "totals": await service.claim_totals(warehouse, principal.project_id),
        "latest_claims": await service.latest_claims(warehouse, principal.project_id, limit),
    }


@router.get("/integrity", responses=success(ProjectIntegrity, "The payouts the rules refused, and the reversals"))
async def integrity(principal: Caller, warehouse: WarehouseDep, limit: int = Query(10, ge=1, le=100)):
    """The payouts the rules refused (API.md §8) per reason and currency, and the newest of them (`limit`); what
    reversals took back (§9) per currency, and the newest reversals (`limit`)."""
    return {
        "rejected": await service.rejected_by_reason(warehouse, principal.project_id),
        "latest_rejected": await service.latest_rejected(warehouse, principal.project_id, limit),
        "reversed": await service.reversed_by_currency(warehouse, principal.project_id),
        "latest_reversals": await service.latest_reversals(warehouse, principal.project_id, limit),
    }


@pages.get("")
async def console_page() -> HTMLResponse:
    return HTMLResponse(_page(), headers=PAGE_HEADERS)


@pages.get("/static/{name}")
async def asset(name: str) -> Response:
    if name not in ASSETS:
        raise HTTPException(404, "Not Found")
    headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
    return Response((STATIC / name).read_bytes(), media_type=ASSETS[name], headers=headers)


@cache
def _page() -> str:
    """The page, its assets named with a hash of their content (a new version is never read from a cache)."""
    page = (STATIC / "console.html").read_text()
    for name in ASSETS:
        version = hashlib.sha256((STATIC / name).read_bytes()).hexdigest()[:12]
        page = page.replace(f"{{{{{name}}}}}", f"/console/static/{name}?v={version}")
    return page.replace("{{api}}", API_PREFIX)
