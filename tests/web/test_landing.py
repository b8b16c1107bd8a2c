"""The front door: `/` (what uvicorn prints) answers a page linking the console, the docs and health, or the same links
as JSON to a client asking for JSON; the pages' favicon. Both shapes, through the one base URL a browser is given."""

import http.client
from urllib.parse import urlsplit

import httpx
import pytest

pytestmark = pytest.mark.parametrize("client_base", ["embedded", "production"], indirect=True)


def test_the_root_is_a_page_linking_the_console_docs_and_health(client_base):
    url = client_base[1]
    page = httpx.get(f"{url}/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for link in ('href="/console"', 'href="/docs"', 'href="/health"', 'rel="icon" href="/favicon.svg"'):
        assert link in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "style-src 'sha256-" in policy and "unsafe" not in policy
    for link in ("/console", "/docs", "/health", "/favicon.svg"):
        assert httpx.get(f"{url}{link}").status_code == 200, link
    bare = http.client.HTTPConnection(*urlsplit(url).netloc.split(":"))  # http.client sends no Accept at all
    bare.request("GET", "/")
    answer = bare.getresponse()
    assert answer.status == 200 and answer.getheader("content-type").startswith("text/html")
    bare.close()
    service = client_base[0].urls["ingest"]  # the service itself (the tests' gateway stand-in relays no HEAD)
    head = httpx.head(f"{service}/")
    assert head.status_code == 200 and head.content == b""


def test_a_json_client_gets_the_links_as_json(client_base):
    answer = httpx.get(f"{client_base[1]}/", headers={"Accept": "application/json"})
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "service": "rewards",
        "console": "/console",
        "docs": "/docs",
        "openapi": "/openapi.json",
        "health": "/health",
    }


def test_the_favicon_is_an_svg_the_console_names(client_base):
    url = client_base[1]
    icon = httpx.get(f"{url}/favicon.svg")
    assert icon.headers["content-type"] == "image/svg+xml" and icon.content.startswith(b"<svg")
    assert httpx.get(f"{url}/favicon.ico").content == icon.content  # what a browser asks for by itself
    assert 'rel="icon" href="/favicon.svg"' in httpx.get(f"{url}/console").text
