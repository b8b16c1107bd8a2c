"""One log line per request (rewards.web.middleware.RequestLogMiddleware): method, path, status, milliseconds and the
key's project, never the key; JSON for a log collector, human lines on a terminal (REWARDS_LOG_FORMAT=auto)."""

import os
import pty
import select
import subprocess
import sys
import time

import httpx
import orjson

from tests.conftest import SERVICE
from tests.support.harness import Admin, Server, free_port, stop_processes, wait_healthy

USER = "0x00000000000000000000000000000000000a11ce"
TOTALS_ROUTE = "/api/v1/payouts/totals/{user_identifier}"  # the parameter's name, never its value


def test_each_request_is_one_json_line_with_its_project_and_never_the_key(tmp_path):
    log_path = tmp_path / "stderr.log"
    server = Server(tmp_path / "data", env={"REWARDS_LOG_LEVEL": "info", "REWARDS_LOG_FORMAT": "json"})
    command = [sys.executable, "-m", "rewards", "serve", "--port", str(server.port), "--data-dir", str(server.data_dir)]
    with log_path.open("wb") as log:
        server.process = subprocess.Popen(command, env=server.env, stderr=log)
    try:
        wait_healthy(server.url, [server.process])
        admin = Admin(server)
        project = admin.project()
        key = admin.key(project, SERVICE)
        with httpx.Client(base_url=f"{server.url}/api/v1", timeout=10) as client:
            summary = client.get("/payouts/summary?currency=point", headers={"Authorization": f"Bearer {key}"})
            assert summary.status_code == 200
            assert client.get("/payouts/summary", headers={"Authorization": "Bearer wrong"}).status_code == 401
            refused = client.post("/events/batch", json={"events": []}, headers={"Authorization": f"Bearer {key}"})
            assert refused.status_code == 400
            totals = client.get(f"/payouts/totals/{USER}?identifier_type=evm_address",
                                headers={"Authorization": f"Bearer {key}"})  # fmt: skip
            assert totals.status_code == 200
        time.sleep(0.3)  # written as it happens; give the process a moment
    finally:
        stop_processes([server.process])
    text = log_path.read_text()
    assert key not in text and "wrong" not in text and USER not in text  # a user's identifier neither
    lines = [orjson.loads(line) for line in text.splitlines() if line.startswith("{")]
    requests = [(r["method"], r["path"], r["status"], r["project"]) for r in lines if r["event"] == "request"]
    assert requests == [
        ("GET", "/api/v1/payouts/summary", 200, project),
        ("GET", "/api/v1/payouts/summary", 401, None),
        ("POST", "/api/v1/events/batch", 400, project),
        ("GET", TOTALS_ROUTE, 200, project),
    ]  # /health (the readiness probe) is logged at debug only
    assert all(isinstance(r["ms"], float) and r["ms"] >= 0 for r in lines if r["event"] == "request")


def test_on_a_terminal_the_lines_are_for_humans(tmp_path):
    port = free_port()
    env = {**os.environ, "REWARDS_LOG_LEVEL": "info"}
    env.pop("REWARDS_LOG_FORMAT", None)
    primary, secondary = pty.openpty()
    command = [sys.executable, "-m", "rewards", "serve", "--port", str(port), "--data-dir", str(tmp_path / "data")]
    process = subprocess.Popen(command, env=env, stderr=secondary, stdout=subprocess.DEVNULL)
    os.close(secondary)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", [process])
        assert httpx.get(f"http://127.0.0.1:{port}/api/v1/payouts/summary").status_code == 401
        text, deadline = "", time.monotonic() + 10
        while "/api/v1/payouts/summary" not in text and time.monotonic() < deadline:
            if select.select([primary], [], [], 0.2)[0]:
                text += os.read(primary, 65536).decode(errors="replace")
    finally:
        stop_processes([process])
        os.close(primary)
    line = next(line for line in text.splitlines() if "/api/v1/payouts/summary" in line)
    assert not line.lstrip().startswith("{"), line  # not JSON
    assert "request" in line and "GET" in line and "401" in line, line
