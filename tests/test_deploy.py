"""deploy/ stays in step with the code: every command exists, and the gateway routes as rewards/routing.py.

(No Docker engine on these machines: the files are checked for what they say, not run.)"""

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rewards.cli import app
from rewards.routing import QUERY_ROUTES, service_for

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
COMMANDS = {"ingest-api", "query-api", "workers", "migrate"}


def rewards_commands() -> list[list[str]]:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    found = [s["command"] for s in compose["services"].values() if "build" in s or s.get("<<")]
    for document in yaml.safe_load_all((DEPLOY / "k8s" / "rewards.yaml").read_text()):
        spec = document.get("spec", {}).get("template", {}).get("spec", {})
        found += [c["args"] for c in spec.get("containers", []) if c.get("image", "").startswith("rewards")]
    return found


def test_every_deployed_command_is_a_rewards_command():
    commands = rewards_commands()
    assert {c[0] for c in commands} == COMMANDS
    for command in commands:
        result = CliRunner().invoke(app, [command[0], "--help"])
        assert result.exit_code == 0, result.output
        for option in (a for a in command[1:] if a.startswith("--")):
            assert option in result.output


def gateway_rules(text: str) -> list[re.Pattern]:
    return [re.compile(m) for m in re.findall(r'"~(\^GET [^"]+)" query;', text)]


@pytest.mark.parametrize("config", [DEPLOY / "gateway.conf", DEPLOY / "k8s" / "rewards.yaml"])
@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/api/v1/payouts/summary"), ("GET", "/api/v1/affiliates"), ("POST", "/api/v1/affiliates"),
     ("GET", "/api/v1/claim-checks/totals"), ("POST", "/api/v1/claim-checks/close"), ("GET", "/api/v1/events/status"),
     ("POST", "/api/v1/events/batch"), ("GET", "/api/v1/referral_codes"), ("GET", "/api/v1/affiliatesx")],
)  # fmt: skip
def test_gateway_routes_like_the_code(config, method, path):
    rules = gateway_rules(config.read_text())
    assert len(rules) == 1 and len(QUERY_ROUTES) == 3
    routed = "query" if any(rule.match(f"{method} {path}") for rule in rules) else "ingest"
    assert routed == service_for(method, path)
