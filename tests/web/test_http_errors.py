"""The HTTP edge's own errors (API.md §0): an unexpected exception answers the contract's 500 and keeps the
connection; a body that is not declared JSON is 415.

An exception has to be provoked without a debug endpoint in the product: `faulty_app` is a tiny app made
by the same `create_app` (middlewares, error handlers) with a router that raises, served by uvicorn in a
process of its own, as `rewards serve` serves the real one.
"""

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Request

from rewards.web.app import create_app
from rewards.web.errors import error_body
from tests.support.harness import free_port, stop_processes

MAX_BODY_BYTES = 1024
SERVE = """
import sys
import uvicorn
from rewards.logging import configure_logging
from tests.web.test_http_errors import faulty_app

configure_logging("info", "json")
uvicorn.run(faulty_app(), host="127.0.0.1", port=int(sys.argv[1]), log_config=None, access_log=False)
"""
NOT_JSON = error_body(415, "Content-Type must be application/json")


def faulty_app() -> FastAPI:
    router = APIRouter()

    @router.api_route("/boom", methods=["GET", "POST"])
    async def boom(request: Request):
        await request.body()
        raise RuntimeError("boom")

    @router.get("/ok")
    async def ok():
        return {"ok": True}

    @router.post("/echo")
    async def echo(request: Request):
        return {"received": len(await request.body())}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        yield

    return create_app("faulty", [router], lifespan, MAX_BODY_BYTES)


class FaultyServer:
    def __init__(self, log_path: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path

    def __enter__(self) -> "FaultyServer":
        root = Path(__file__).resolve().parents[2]
        with self.log_path.open("wb") as log:
            command = [sys.executable, "-c", SERVE, str(self.port)]
            self.process = subprocess.Popen(command, cwd=root, stderr=log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log_path.read_text()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/api/v1/ok", timeout=1).status_code == 200:
                    return self
            time.sleep(0.1)
        raise RuntimeError("the faulty app did not start")

    def __exit__(self, *exc) -> None:
        stop_processes([self.process])

    def log_lines(self) -> list[str]:
        return self.log_path.read_text().splitlines()


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    with FaultyServer(tmp_path_factory.mktemp("faulty") / "stderr.log") as server:
        yield server


def client_port(response: httpx.Response) -> int:
    """The local port of the connection that carried the response."""
    return response.extensions["network_stream"].get_extra_info("client_addr")[1]


def test_an_unexpected_error_is_500_logged_once_counted_and_the_connection_stays(faulty):
    with httpx.Client(base_url=f"{faulty.url}/api/v1", timeout=10) as client:
        failed = client.get("/boom")
        assert failed.status_code == 500
        assert failed.json() == error_body(500, "Internal Server Error")
        after = client.get("/ok")
        assert after.status_code == 200
        assert client_port(after) == client_port(failed)  # the same keep-alive connection

        with_body = client.post("/boom", json={"a": 1})  # the body read, then the exception
        assert with_body.status_code == 500
        assert client.get("/ok").status_code == 200
        assert client_port(with_body) == client_port(failed)

        metrics = httpx.get(f"{faulty.url}/metrics").text
        assert "rewards_http_unhandled_errors_total 2.0" in metrics
        assert 'handler="/api/v1/boom",method="GET",status="5xx"' in metrics  # the request metrics see it
    time.sleep(0.2)  # the log lines are written as they happen; give the process a moment
    lines = faulty.log_lines()
    unhandled = [line for line in lines if '"unhandled error"' in line]
    assert len(unhandled) == 2, lines
    assert all("RuntimeError: boom" in line and '"path": "/api/v1/boom"' in line for line in unhandled)
    assert not [line for line in lines if "Exception in ASGI application" in line], lines


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/json",
        "application/jsonx",
        "application/json-seq",
        "",
    ],
)
def test_a_body_not_declared_json_is_415(faulty, content_type):
    headers = {} if content_type is None else {"Content-Type": content_type}
    with httpx.Client(base_url=f"{faulty.url}/api/v1", timeout=10) as client:
        refused = client.post("/echo", content=b'{"a": 1}', headers=headers)
        assert refused.status_code == 415
        assert refused.json() == NOT_JSON
        assert client.get("/ok").status_code == 200
        assert client_port(refused) == client_port(client.get("/ok"))


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON;charset=UTF-8",
        "application/vnd.api+json",
        "application/merge-patch+json; charset=utf-8",
    ],
)
def test_json_media_types_are_accepted(faulty, content_type):
    response = httpx.post(f"{faulty.url}/api/v1/echo", content=b'{"a": 1}', headers={"Content-Type": content_type})
    assert response.status_code == 200
    assert response.json() == {"received": 8}


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_request_without_a_body_passes_whatever_its_content_type(faulty, content_type):
    headers = {} if content_type is None else {"Content-Type": content_type}
    assert httpx.post(f"{faulty.url}/api/v1/echo", headers=headers).json() == {"received": 0}
    empty_chunked = httpx.post(f"{faulty.url}/api/v1/echo", content=iter([b""]), headers=headers)
    assert empty_chunked.json() == {"received": 0}


def test_a_chunked_body_is_judged_by_its_content_type(faulty):
    url = f"{faulty.url}/api/v1/echo"
    chunks = [b"", b'{"a"', b": 1}"]
    refused = httpx.post(url, content=iter(chunks), headers={"Content-Type": "text/plain"})
    assert refused.status_code == 415
    assert refused.json() == NOT_JSON
    accepted = httpx.post(url, content=iter(chunks), headers={"Content-Type": "application/json"})
    assert accepted.json() == {"received": 8}


def test_a_body_too_large_is_413_before_its_content_type_is_judged(faulty):
    response = httpx.post(f"{faulty.url}/api/v1/echo", content=b"x" * (MAX_BODY_BYTES + 1))
    assert response.status_code == 413
    assert response.json()["statusCode"] == 413


def test_405_names_every_method_of_the_path(embedded_server):
    """Starlette's Allow names the first route's methods; GET and POST /affiliates are two routers' routes."""
    response = httpx.request("OPTIONS", f"{embedded_server.url}/api/v1/affiliates")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"
    assert response.json() == error_body(405, "Method Not Allowed")
    assert httpx.put(f"{embedded_server.url}/api/v1/referral_codes/ABC").headers["allow"] == "GET, PATCH"


def test_a_trailing_slash_is_a_404_that_names_the_path_without_it(embedded_server):
    for path in ("/api/v1/payouts/summary/", "/api/v1/referral_codes/ABC/"):
        response = httpx.get(f"{embedded_server.url}{path}", follow_redirects=False)
        assert response.status_code == 404
        hint = f"Not Found: no path ends in '/'; did you mean {path.rstrip('/')}?"
        assert response.json() == error_body(404, hint)
    elsewhere = httpx.get(f"{embedded_server.url}/api/v1/nowhere/", follow_redirects=False)
    assert elsewhere.status_code == 404 and elsewhere.json() == error_body(404, "Not Found")


def test_the_service_requires_json_bodies_but_takes_fields_from_the_query_without_one(api):
    """POST /referral_codes and PATCH /referral_codes/{code}/use as the published client sends them: fields
    in the query string, no body, whatever the Content-Type; a body must be JSON."""
    owner = {"user_identifier": "owner@example.com", "user_identifier_type": "email", "quantity": "1"}
    created = api.post("/referral_codes", params=owner, headers={"Content-Type": "text/plain"})
    assert created.status_code == 201, created.text
    assert api.post("/referral_codes", params=owner).status_code == 201
    code = created.json()[0]["code"]

    user = {"user_identifier": "user@example.com", "user_identifier_type": "email"}
    refused = api.patch(f"/referral_codes/{code}/use", content=b'{"user_identifier": "x"}', params=user)
    assert refused.status_code == 415
    assert refused.json() == NOT_JSON
    used = api.patch(f"/referral_codes/{code}/use", params=user, headers={"Content-Type": "text/plain"})
    assert used.status_code == 200, used.text
    assert used.json()["current_uses"] == 1

    body = b'{"events": []}'
    assert api.post("/events/batch", content=body, headers={"Content-Type": "text/plain"}).status_code == 415
    batch = api.post("/events/batch", content=body, headers={"Content-Type": "application/json; charset=utf-8"})
    assert batch.status_code == 400  # past the Content-Type: an empty batch is invalid
