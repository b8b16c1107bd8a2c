"""A browser page of another origin (the published client in a project's own site) may call the API: its preflight is
answered, and answers carry the CORS headers (REWARDS_CORS_ORIGINS, any origin by default)."""

import httpx

from tests.support.harness import url_for

ORIGIN = "https://shop.example"


def test_a_preflight_from_another_origin_is_answered(server):
    for method, path in (("POST", "/api/v1/events"), ("GET", "/api/v1/payouts/summary")):
        response = httpx.options(
            url_for(server, method, path),
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": method,
                "Access-Control-Request-Headers": "authorization,content-type,x-fuul-sdk-version",
            },
        )
        assert response.status_code == 200, response.text
        assert response.headers["access-control-allow-origin"] == "*"
        allowed = response.headers["access-control-allow-headers"].lower()
        assert {"authorization", "content-type", "x-fuul-sdk-version"} <= set(allowed.replace(" ", "").split(","))
        assert method in response.headers["access-control-allow-methods"]


def test_answers_carry_the_origin_and_expose_the_rate_limit_headers(api):
    response = api.get("/payouts/summary", params={"currency": "point"}, headers={"Origin": ORIGIN})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "*"
    exposed = response.headers["access-control-expose-headers"].lower()
    assert "x-ratelimit-remaining" in exposed and "retry-after" in exposed
    refused = httpx.get(url_for(api.server, "GET", "/api/v1/payouts/summary"), headers={"Origin": ORIGIN})
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == "*"  # errors too
