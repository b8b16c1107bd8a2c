"""The service's front door: `GET /` (what uvicorn prints on start-up) and the favicon of its pages.

A browser gets a small page linking the console, the API docs and health; a client asking for JSON
(`Accept: application/json`) gets the same links as JSON. Every app serves them (the embedded one and both production
APIs), so the gateway routes `/` anywhere."""

import base64
import hashlib
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

FAVICON = (resources.files("rewards.web") / "static" / "favicon.svg").read_bytes()
LINKS = {"console": "/console", "docs": "/docs", "openapi": "/openapi.json", "health": "/health"}

_STYLE = """
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: #1c2430; background: #f4f6f9; }
main { max-width: 36rem; margin: 12vh auto; padding: 0 1.25rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; } p { color: #4a5668; margin: 0 0 1.5rem; }
a.card { display: block; padding: .9rem 1.1rem; margin: 0 0 .75rem; border-radius: 10px; background: #fff;
  color: #1f3a5f; text-decoration: none; border: 1px solid #d9dfe7; }
a.card:hover, a.card:focus { border-color: #1f3a5f; } a.card span { display: block; color: #4a5668; font-size: .9rem; }
"""
_PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Rewards</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<style>{_STYLE}</style>
</head>
<body>
<main>
<h1>Rewards</h1>
<p>Rewards, referral and event-ingestion service.</p>
<a class="card" href="/console">Console<span>A project's pipeline, payouts, affiliates and claim checks (sign in with an
API key).</span></a>
<a class="card" href="/docs">API docs<span>Every endpoint, its parameters and its answers; try them out.</span></a>
<a class="card" href="/health">Health<span>Whether the service and its engines answer.</span></a>
</main>
</body>
</html>
"""
# The inline style is allowed by its hash: nothing else inline runs, nothing is loaded from elsewhere.
_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
PAGE_HEADERS = {
    "Content-Security-Policy": f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Vary": "Accept",
}

router = APIRouter(include_in_schema=False)


def wants_json(accept: str) -> bool:
    return "application/json" in accept and "text/html" not in accept


@router.api_route("/", methods=["GET", "HEAD"])
async def landing(request: Request) -> Response:
    if wants_json(request.headers.get("accept", "")):
        return JSONResponse({"service": "rewards", **LINKS}, headers={"Vary": "Accept"})
    return HTMLResponse(_PAGE, headers=PAGE_HEADERS)


@router.get("/favicon.svg")
@router.get("/favicon.ico")  # what a browser asks for by itself: the same SVG (every browser of today reads it)
async def favicon() -> Response:
    headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
    return Response(FAVICON, media_type="image/svg+xml", headers=headers)
