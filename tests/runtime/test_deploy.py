"""deploy/ stays in step with the code: every command exists, and the gateway routes as rewards/web/routing.py.

(No Docker engine on these machines: the files are checked for what they say, not run.)"""

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rewards.cli import app
from rewards.web import routing
from rewards.web.routing import QUERY_ROUTES, service_for

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMMANDS = {"ingest-api", "query-api", "workers", "webhooks", "migrate"}


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


def gateway_rules(text: str) -> list[tuple[re.Pattern, str]]:
    """The `map` choosing the upstream, as nginx reads it: regexes in order, the first match wins."""
    assert re.search(r'^\s*map "\$request_method \$uri" \$rewards_service \{\n\s*default ingest;$', text, re.M)
    return [(re.compile(m), service) for m, service in re.findall(r'^\s*"~([^"]+)" (\w+);$', text, re.M)]


def app_routes() -> list[tuple[str, str, str]]:
    """(service, method, path) of every route the two APIs serve, path parameters filled in."""
    from ingest_api.app import ROUTERS as INGEST
    from query_api.app import ROUTERS as QUERY

    return [
        (service, method, "/api/v1" + re.sub(r"\{[^}]+\}", "x", route.path))
        for service, routers in (("ingest", INGEST), ("query", QUERY))
        for router in routers
        for route in router.routes
        for method in sorted(route.methods)
    ]


def routing_cases() -> list[tuple[str, str]]:
    """Every route of the APIs, and around every prefix of the table: under it, beside it, other methods."""
    cases = {(method, path) for _, method, path in app_routes()}
    for method, prefix in QUERY_ROUTES:
        for path in (prefix, prefix + "/", prefix + "/a/b", prefix + "x", prefix + "-x", prefix.rsplit("/", 1)[0]):
            cases |= {(m, path) for m in {method, "GET", "POST", "PUT", "PATCH", "DELETE"}}
    return sorted(cases)


@pytest.mark.parametrize("config", [DEPLOY / "gateway.conf", DEPLOY / "k8s" / "rewards.yaml"])
@pytest.mark.parametrize(("method", "path"), routing_cases())
def test_gateway_routes_like_the_code(config, method, path):
    rules = gateway_rules(config.read_text())
    assert len(rules) == len(QUERY_ROUTES)
    routed = next((service for rule, service in rules if rule.match(f"{method} {path}")), "ingest")
    assert routed == service_for(method, path)


@pytest.mark.parametrize("name", routing.GENERATED_FILES)
def test_deploy_routes_are_generated_from_the_table(name):
    text = (DEPLOY.parent / name).read_text()
    assert routing.render(text) == text, "run `python -m rewards.web.routing`"


def test_a_deploy_file_out_of_step_with_the_table_fails_the_check(tmp_path):
    for name in routing.GENERATED_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text((DEPLOY.parent / name).read_text())
    assert routing.stale_files(tmp_path) == []
    edited = (tmp_path / "deploy" / "gateway.conf").read_text().replace('"~^GET /api/v1/affiliates(/|$)" query;\n', "")
    (tmp_path / "deploy" / "gateway.conf").write_text(edited)
    assert routing.stale_files(tmp_path) == ["deploy/gateway.conf"]
    assert routing.main(["--check"]) == 0  # the committed files are in step


@pytest.mark.parametrize(("service", "method", "path"), app_routes())
def test_the_table_sends_every_route_to_the_api_serving_it(service, method, path):
    assert service_for(method, path) == service


@pytest.mark.parametrize("config", [DEPLOY / "gateway.conf", DEPLOY / "k8s" / "rewards.yaml"])
def test_the_gateways_own_refusals_are_the_contracts_error_body(config):
    """nginx answers some requests itself (a request line or body past its limits, a malformed request): in the
    contract's body, with the services' own bounds and messages (rewards.web.protocol, the body limit's middleware)."""
    from rewards.settings import Settings
    from rewards.web.protocol import MAX_REQUEST_LINE_BYTES, TOO_LONG

    text = config.read_text()
    assert re.search(r"large_client_header_buffers \d+ (\d+)k;", text).group(1) == str(MAX_REQUEST_LINE_BYTES // 1024)
    assert f"client_max_body_size {Settings().max_body_bytes // 2**20}m;" in text
    pages = dict(re.findall(r"error_page ([\d ]+) = @(\w+);", text))
    assert sorted(code for codes in pages for code in codes.split()) == ["400", "413", "414", "494"]
    answers = {name: (int(code), json.loads(body)) for name, code, body in re.findall(
        r"location @(\w+) \{\s*default_type application/json;\s*return (\d+) '([^']*)';", text)}  # fmt: skip
    assert set(answers) == set(pages.values())
    for name, (status, body) in answers.items():
        assert set(body) == {"statusCode", "error", "message"} and body["statusCode"] == status, name
    assert answers[pages["414"]][1]["message"] == TOO_LONG
    assert (
        answers[pages["413"]][1]["message"] == f"Request body must not be larger than {Settings().max_body_bytes} bytes"
    )
