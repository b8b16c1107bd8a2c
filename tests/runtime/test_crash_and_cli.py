"""Durability (SIGKILL right after a 200) and the command line, as real processes."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest
from typer.testing import CliRunner

from rewards.cli import app
from rewards.domain.keys import split_key
from tests.conftest import event, evm
from tests.support.cli import rewards
from tests.support.harness import Admin, Api, Server

CONFIG = {
    "default_tier": None,
    "tiers": [],
    "conversions": [{"event_name": "purchase", "base": {"fixed": "7"}, "end_user_reward": {"rate": "1"}}],
}


def test_sigkill_right_after_the_200_loses_nothing_and_pays_once(tmp_path):
    data = tmp_path / "data"
    server = Server(data).start()
    admin = Admin(server)
    project = admin.project()
    key = admin.key(project, "service_role")
    events = [event(f"k{i}", user=evm(i)) for i in range(100)]
    with Api(server, key, project) as api:
        api.put("/projects/config", json=CONFIG)
        assert api.post("/events/batch", json={"events": events}).json() == {"ingested_events": 100}
    server.stop(signal.SIGKILL)

    restarted = Server(data).start()
    try:
        with Api(restarted, key, project) as api:
            api.wait_processed(*(e["dedup_id"] for e in events))
            assert api.get("/payouts/summary", params={"currency": "point"}).json() == {"total_payouts": "700"}
            assert api.post("/events/batch", json={"events": events}).json() == {"ingested_events": 0}
    finally:
        restarted.stop()


def test_cli_projects_keys_and_config(tmp_path, embedded_server):
    data = embedded_server.data_dir  # works beside the running server on the same data dir
    created = rewards("project", "create", "--name", "cli", data_dir=data)
    assert created.returncode == 0, created.stderr
    project = json.loads(created.stdout)["project_id"]
    key = rewards("key", "create", "--project", project, "--scope", "service_role", data_dir=data)
    body = json.loads(key.stdout)
    assert body["project_id"] == project and body["scopes"] == ["service_role"] and body["api_key"].startswith("rk_")
    listed = {p["project_id"]: p for p in json.loads(rewards("project", "list", data_dir=data).stdout)}
    assert listed[project]["name"] == "cli" and listed[project]["deleted_at"] is None
    spare = json.loads(rewards("key", "create", "--project", project, data_dir=data).stdout)["api_key"]
    keys = rewards("key", "list", "--project", project, data_dir=data)
    (key_id, secret), (spare_id, spare_secret) = split_key(body["api_key"]), split_key(spare)
    assert secret not in keys.stdout and spare_secret not in keys.stdout  # no secret (a secret may hold `_`)
    assert {(k["key_id"], tuple(k["scopes"]), k["revoked_at"]) for k in json.loads(keys.stdout)} == {
        (key_id, ("service_role",), None),
        (spare_id, (), None),
    }
    assert rewards("key", "revoke", "--id", spare_id, data_dir=data).returncode == 0
    assert rewards("key", "revoke", "--id", spare_id, data_dir=data).returncode == 1
    assert rewards("key", "list", "--project", "nope", data_dir=data).returncode == 1

    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        "default_tier: null\ntiers: []\nconversions:\n  - event_name: signup\n    base: {fixed: '100'}\n"
    )
    loaded = rewards("project", "config", "--project", project, "--file", str(config_file), data_dir=data)
    assert loaded.returncode == 0, loaded.stderr
    with Api(embedded_server, body["api_key"], project) as api:
        assert api.get("/projects/config").json()["conversions"][0]["base"] == {"fixed": "100"}
        config_file.write_text('{"default_tier": "missing"}')
        bad = rewards("project", "config", "--project", project, "--file", str(config_file), data_dir=data)
        assert bad.returncode != 0 and "default_tier" in bad.stderr and bad.stdout == ""

        assert rewards("key", "revoke", body["api_key"], data_dir=data).returncode == 0
        assert api.get("/projects/config").status_code == 401
    assert rewards("key", "revoke", body["api_key"], data_dir=data).returncode != 0
    assert rewards("key", "create", "--project", "nope", data_dir=data).returncode != 0
    assert rewards("key", "create", "--project", project, "--scope", "admin", data_dir=data).returncode != 0
    neither = rewards("project", "delete", data_dir=data)
    assert neither.returncode == 1 and "--project ID" in neither.stderr
    assert rewards("project", "delete", "--project", project, data_dir=data).returncode == 0
    assert rewards("project", "delete", project, data_dir=data).returncode != 0  # the argument's form: gone already


def test_a_malformed_json_config_is_reported_in_json_terms(tmp_path):
    config_file = tmp_path / "config.json"
    config_file.write_text('{"default_tier": null,, "tiers": []}')
    result = rewards("project", "config", "--project", "p", "--file", str(config_file), data_dir=tmp_path)
    assert result.returncode == 1 and result.stdout == ""
    error = json.loads(result.stderr)["error"]
    assert error.startswith(f"{config_file} is not valid JSON: ") and "line 1, column 23" in error, error
    assert "YAML" not in error and "scanner" not in error


@pytest.mark.parametrize("args", [["--help"], ["project", "--help"], ["key", "--help"]])
def test_cli_help(args, tmp_path):
    result = subprocess.run([sys.executable, "-m", "rewards", *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "Usage" in result.stdout


@pytest.mark.parametrize("args", [["project", "delete"], ["key", "revoke"], ["project", "config"], ["key", "create"]])
def test_the_help_names_arguments_plainly(args, tmp_path):
    """No typer-isms a reader must decode: `{PROJECT_ID}` for a required argument, `PROJECT_ID <str>` beside it."""
    shown = CliRunner().invoke(app, [*args, "--help"], prog_name="rewards").stdout
    assert shown.startswith("Usage: rewards ") and "{" not in shown and "<str>" not in shown, shown


def test_cli_refuses_a_data_dir_that_does_not_exist_naming_it(tmp_path):
    missing = tmp_path / "elsewhere"
    result = rewards("key", "create", "--project", "p", "--scope", "service_role", data_dir=missing)
    assert result.returncode == 1 and result.stdout == ""
    assert json.loads(result.stderr)["error"].startswith(f"no data in {missing}")
    assert not missing.exists()  # nothing created: a key made there would answer 401 from the real server


def test_a_second_server_on_the_same_data_dir_says_so_in_one_line(embedded_server):
    command = [sys.executable, "-m", "rewards", "serve", "--port", "0", "--data-dir", str(embedded_server.data_dir)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        json.dumps({"error": f"another `rewards serve` is running on {embedded_server.data_dir.resolve()}"})
    ]


def test_serve_says_where_it_listens_once_ready(tmp_path):
    """The README's walkthrough waits for "Uvicorn running" (the server binds its socket itself: uvicorn would not
    say where)."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "rewards", "serve", "--port", str(port), "--data-dir", str(tmp_path)]
    env = {**os.environ, "REWARDS_LOG_LEVEL": "info"}
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: _read_until(server.stderr, "Uvicorn running", lines), daemon=True)
        reader.start()
        reader.join(timeout=60)
        assert lines and f"Uvicorn running on http://127.0.0.1:{port}" in lines[-1], lines
    finally:
        server.terminate()
        server.wait(timeout=30)


def _read_until(stream, text: str, lines: list[str]) -> None:
    for line in stream:
        lines.append(line)
        if text in line:
            return


def test_serve_on_a_busy_port_says_so_before_anything_starts(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        command = [sys.executable, "-m", "rewards", "serve", "--port", str(port), "--data-dir", str(tmp_path)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        json.dumps({"error": f"cannot listen on 127.0.0.1:{port}: Address already in use"})
    ]
    assert not (tmp_path / "warehouse").exists() and not (tmp_path / "state.sqlite3").exists()  # nothing opened


@pytest.mark.parametrize(
    "command",
    [[], ["serve"], ["ingest-api"], ["query-api"], ["workers"], ["migrate"], ["bound-redis-keys"], ["project"],
     ["project", "create"], ["project", "list"], ["project", "delete"], ["project", "config"], ["key"],
     ["key", "create"], ["key", "list"], ["key", "revoke"], ["demo"]],
)  # fmt: skip
def test_help_names_what_each_option_takes_not_its_python_type(command):
    """(typer still shows an argument's type: `API_KEY <str>`.)"""
    from typer.testing import CliRunner

    from rewards.cli import app

    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Show this message and exit." in result.output and "<bool>" not in result.output, result.output
    options = [line for line in result.output.splitlines() if line.lstrip().startswith("--")]
    assert options and not [line for line in options if "<" in line.split("  ")[0]], result.output  # NAME, not <str>
