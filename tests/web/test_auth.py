"""API.md §0: bearer keys, scopes, the error body."""

import re

import httpx
import pytest

from tests.support.harness import url_for


def error_of(response: httpx.Response, status: int) -> str | list:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["statusCode"] == status and isinstance(body["error"], str)
    return body["message"]


MISSING = "Missing Authorization header: send 'Authorization: Bearer <API key>'"
NOT_BEARER = "The Authorization header must be 'Bearer <API key>'"
UNKNOWN = "Unknown or revoked API key"


@pytest.mark.parametrize(
    ("header", "message"),
    [(None, MISSING), ("", MISSING), ("Bearer", NOT_BEARER), ("Basic abc", NOT_BEARER),
     ("abc", NOT_BEARER), ("Bearer rk_nope_nope", UNKNOWN), ("Bearer garbage", UNKNOWN)],
)  # fmt: skip
def test_missing_malformed_or_unknown_key_is_401_saying_which(server, header, message):
    headers = {} if header is None else {"Authorization": header}
    for path in ("/api/v1/payouts/summary?currency=point", "/api/v1/projects/config"):
        response = httpx.get(url_for(server, "GET", path), headers=headers)
        assert error_of(response, 401) == message
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert "garbage" not in response.text and "rk_nope" not in response.text  # the key is never echoed


def test_revoked_key_is_401(make_api, admin):
    api = make_api()
    assert api.get("/payouts/summary", params={"currency": "point"}).status_code == 200
    admin.revoke(api.api_key)
    assert error_of(api.get("/payouts/summary", params={"currency": "point"}), 401) == UNKNOWN


def test_deleted_project_is_404(make_api, admin, project):
    api = make_api()
    admin.delete(project)
    assert error_of(api.get("/payouts/summary", params={"currency": "point"}), 404) == "Project not found"


def test_key_without_scope_is_403_and_service_role_is_accepted_everywhere(make_api):
    standard, reader, service = make_api(), make_api("referral_codes:read"), make_api("service_role")
    body = {"events": [{"name": "x", "user_identifier": "a@b.co", "user_identifier_type": "email", "dedup_id": "1"}]}
    error_of(standard.post("/events/batch", json=body), 403)
    error_of(reader.post("/referral_codes", json={"user_identifier": "a@b.co", "user_identifier_type": "email"}), 403)
    error_of(
        standard.get("/referral_codes", params={"user_identifier": "a@b.co", "user_identifier_type": "email"}), 403
    )
    assert service.post("/events/batch", json=body).status_code == 200
    assert service.get("/projects/config").status_code == 200


def test_a_project_never_reads_another_projects_data(make_api, admin):
    mine = make_api("service_role")
    theirs = make_api("service_role", project_id=admin.project())
    code = mine.post("/referral_codes", json={"user_identifier": "a@b.co", "user_identifier_type": "email"}).json()[0]
    error_of(theirs.get(f"/referral_codes/{code['code']}"), 404)


def test_unknown_route_and_unknown_query_parameters(api):
    assert error_of(api.get("/nope"), 404)
    assert api.get("/payouts/summary", params={"currency": "point", "whatever": "1"}).status_code == 200


def test_body_over_the_limit_is_413(api):
    response = api.post("/events/batch", content=b"{" + b" " * (3 * 1024 * 1024) + b"}")
    error_of(response, 413)


def test_authentication_is_checked_before_the_query(server):
    response = httpx.get(url_for(server, "GET", "/api/v1/payouts/leaderboard/users?from=garbage&page=0"))
    error_of(response, 401)


def test_every_operation_of_the_openapi_documents_is_401_without_a_key(server):
    """Nothing of a project is answered without a key: every operation of each service's own OpenAPI document (but
    /health, which names no project, and GET /claimable-rewards, API.md §9's one public read, which declares no
    security), its path parameters filled in and a JSON body sent to writes, is a 401 before anything else is read."""
    operations, public = set(), set()
    for base in set(server.urls.values()):
        document = httpx.get(f"{base}/openapi.json").json()
        found = {(m.upper(), p): op for p, methods in document["paths"].items() for m, op in methods.items()}
        public |= {key for key, operation in found.items() if operation.get("security") == []}
        operations |= {key for key in found if key[1] != "/health"} - public
    assert public == {("GET", "/api/v1/claimable-rewards")}
    assert len(operations) > 40 and all(path.startswith("/api/v1/") for _, path in operations)
    for method, path in sorted(operations):
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        body = {} if method in ("POST", "PUT", "PATCH") else None
        response = httpx.request(method, url_for(server, method, concrete), json=body)
        assert error_of(response, 401) == MISSING, (method, path)
