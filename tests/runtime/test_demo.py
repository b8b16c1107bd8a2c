"""`rewards demo` (docs/demo.md), run as a person runs it, against the session's embedded server: what its project
then shows through the API the console reads. The same seed makes the same figures."""

import json
import os
import random
import subprocess
import sys
from decimal import Decimal

from runtime.demo import program
from tests.support.harness import Api, eventually, free_port, run_async

CONVERSIONS = 200


def demo(url: str, data_dir, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "rewards", "demo", "--url", url, "--data-dir", str(data_dir), *args]
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "REWARDS_REDIS_URL")}  # the data dir's state
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)


def made_by_demo(server) -> dict:
    done = demo(server.url, server.data_dir, "--conversions", str(CONVERSIONS))
    assert done.returncode == 0, done.stderr
    assert "conversions" in done.stderr  # the progress bars
    return json.loads(done.stdout)


def figures(api: Api) -> dict:
    """What the affiliate listing shows of each affiliate, by name, and the points paid in all."""
    listing = api.get("/affiliates", params={"per_page": 100}).json()
    shown = ("tier", "status", "region", "referred_users", "r1_volume", "r2_volume", "r3_volume", "r4_volume")
    affiliates = {a["name"]: {name: a[name] for name in shown} for a in listing["results"]}
    summary = api.get("/payouts/summary", params={"currency": "point"}).json()["total_payouts"]
    return {"affiliates": affiliates, "total_points": summary}


def test_the_demo_makes_a_project_with_four_levels_of_affiliates_conversions_and_a_claim(embedded_server):
    made = made_by_demo(embedded_server)
    assert made["console_url"] == f"{embedded_server.url}/console" and made["conversions"] == CONVERSIONS
    assert made["claim_checks"]["closed"] > made["claim_checks"]["claimed"] > 0
    with Api(embedded_server, made["api_key"], made["project_id"]) as api:
        assert api.get("/console/health").json()["project_name"] == "Demo shop"
        seen = figures(api)
        assert Decimal(seen["total_points"]) > 0
        affiliates = seen["affiliates"].values()
        assert len(affiliates) == made["affiliates"]
        for level in range(1, 5):  # affiliates earn on every level of the chain; the top ones on the fourth
            assert any(Decimal(a[f"r{level}_volume"]) > 0 for a in affiliates), level
        assert {a["tier"]["id"] for a in affiliates} == {"base", "gold"}

        claimed = api.get("/claim-checks/rewards-payouts", params={"status": "claimed"}).json()["results"]
        claimer = {k: claimed[0][k] for k in ("user_identifier", "user_identifier_type")}
        history = eventually(lambda: _one(api.get("/claim-checks/claim-history", params=claimer).json()["results"]))
        assert history["currency_name"] == "USDC" and int(history["amount"]) > 0

    async def keys(state):
        return await state.list_keys(made["project_id"])

    live = [k for k in run_async(_on_state(embedded_server, keys)) if k.revoked_ms is None]
    assert [k.key_id for k in live] == [made["api_key"].split("_")[1]]  # the ingestion keys are revoked


def test_the_same_seed_draws_the_same_program():
    """What the demo sends is drawn from its seed alone (times as offsets from now): the same seed, the same people
    and conversions, so the same figures; another seed, others. (Sending them twice would take ten seconds more of
    the suite to show what this shows.)"""

    def drawn(seed: int) -> tuple:
        rng = random.Random(seed)
        group = program.people(rng)
        return group, program.conversions(rng, group, CONVERSIONS, now_ms=1_790_000_000_000)

    assert drawn(7) == drawn(7)
    assert drawn(7) != drawn(8)


def test_without_a_server_it_says_how_to_start_one(embedded_server):
    done = demo(f"http://127.0.0.1:{free_port()}", embedded_server.data_dir)
    assert done.returncode == 1 and done.stdout == ""
    assert "no rewards server answers" in json.loads(done.stderr)["error"]
    for address in ("file:///etc/passwd", "ftp://127.0.0.1/", "127.0.0.1:8000"):
        done = demo(address, embedded_server.data_dir)
        assert done.returncode == 1 and "must be an http:// or https:// address" in json.loads(done.stderr)["error"]


def test_against_another_data_dir_it_says_so_and_leaves_no_project_behind(embedded_server, tmp_path):
    other = tmp_path / "other"
    made = subprocess.run(
        [sys.executable, "-m", "rewards", "project", "create", "--name", "elsewhere", "--data-dir", str(other)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    done = demo(embedded_server.url, other, "--conversions", "100")
    assert done.returncode == 1 and done.stdout == ""
    assert "does not know the key just made" in done.stderr and "was deleted" in done.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "rewards", "project", "list", "--data-dir", str(other)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    demo_projects = [p for p in json.loads(listed.stdout) if p["name"] == "Demo shop"]
    assert len(demo_projects) == 1 and demo_projects[0]["deleted_at"] is not None  # its keys answer 404


def _one(results: list) -> dict:
    assert len(results) == 1, results
    return results[0]


async def _on_state(server, action):
    state = await server.open_state()
    try:
        return await action(state)
    finally:
        await state.close()
