"""API.md §11's exports on both shapes: GET /exports/payouts and /exports/conversions stream every row of a window of
event time (`from` inclusive, `to` exclusive) as CSV, NDJSON or Parquet, the same rows in each, amounts exact; paid,
rejected (a cap's rest) and reversing rows, a token payout with its claim check's status; only the key's project.

Bob referred Carol. Purchases of 100 pay the buyer 10 points and Bob 10% (10 points); the buyer's points are capped
at 25 (so Carol's third purchase pays 5 and rejects 5); a swap pays Alice 6 USDC; half of Carol's first purchase is
reversed. Dave's purchase is a day before the window."""

import csv
import io
import json
import os
import subprocess
import sys
import time
from decimal import Decimal

import orjson
import pyarrow.parquet as pq
import pytest

from rewards.domain.amounts import format_amount
from rewards.domain.timestamps import format_timestamp
from tests.conftest import event, evm
from tests.support.harness import Admin, Api, eventually
from tests.web.test_auth import error_of

ALICE, BOB, CAROL, DAVE = evm(1), evm(2), evm(3), evm(4)
USDC = {"address": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "chain_id": 1, "name": "USDC", "decimals": 6}
TIERS = [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0", "r3": "0", "r4": "0"}}]
CONFIG = {
    "default_tier": "base",
    "tiers": TIERS,
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "end_user_reward": {"fixed": "10"}},
        {"event_name": "swap", "base": {"fixed": "6"}, "currency": USDC, "end_user_reward": {"rate": "1"}},
    ],
    "caps": [{"applies_to": "end_user", "currency": "point", "amount": "25", "window": "30d"}],
}
T0 = (int(time.time() * 1000) // 1000 - 3600) * 1000  # an hour ago, on a second
START, END = format_timestamp(T0), format_timestamp(T0 + 4000)  # p-1 at START is in, s-1 at END is out


def who(identifier: str) -> dict:
    return {"user_identifier": identifier, "user_identifier_type": "evm_address"}


def bought(dedup_id: str, user: str, at_ms: int, name: str = "purchase") -> dict:
    return {**event(dedup_id, user, name), "timestamp": at_ms, "args": {"value": {"amount": "100"}}}


@pytest.fixture(scope="module")
def world(server):
    admin = Admin(server)
    project = admin.project()
    api = Api(server, admin.key(project, "service_role"), project)
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    code = api.post("/referral_codes", json={**who(BOB), "quantity": 1}).json()[0]["code"]
    assert api.patch(f"/referral_codes/{code}/use", json=who(CAROL)).status_code == 200
    events = [bought("p-0", DAVE, T0 - 86_400_000), bought("p-1", CAROL, T0), bought("p-2", CAROL, T0 + 1000),
              bought("p-3", CAROL, T0 + 2000), bought("s-1", ALICE, T0 + 4000, "swap")]  # fmt: skip
    for one in events:  # one at a time: the cap cuts p-3, the last of Carol's
        assert api.post("/events/batch", json={"events": [one]}).status_code == 200
        api.wait_processed(one["dedup_id"])
    reversed_ = api.post("/events/reversals", json={"reversals": [{"dedup_id": "p-1", "reason": "refund",
                                                                   "fraction": "0.5"}]})  # fmt: skip
    assert reversed_.json() == {"reversed": 1}, reversed_.text
    eventually(lambda: _reversed(api))
    api.close()
    return server, admin, project


@pytest.fixture
def shop(world):
    """The project, through a key of its own per test (exports are limited to 10 a minute per key)."""
    server, admin, project = world
    with Api(server, admin.key(project, "service_role"), project) as api:
        yield api


def _reversed(api: Api) -> None:
    assert api.get("/events/status", params={"dedup_id": "p-1"}).json()["status"] == "partially_reversed"


def export(api: Api, what: str, fmt: str, **window) -> list[dict]:
    """The export's rows, as text (the CSV's view: every value a string)."""
    answer = api.get(f"/exports/{what}", params={"format": fmt, **window})
    assert answer.status_code == 200, answer.text
    if fmt == "csv":
        assert answer.headers["content-type"].startswith("text/csv")
        return list(csv.DictReader(io.StringIO(answer.text)))
    if fmt == "ndjson":
        return [_as_text(orjson.loads(line)) for line in answer.content.splitlines()]
    table = pq.read_table(io.BytesIO(answer.content))
    return [_as_text(row) for row in table.to_pylist()]


def _as_text(row: dict) -> dict:
    def text(value) -> str:
        if isinstance(value, Decimal):
            return format_amount(value)
        if hasattr(value, "timestamp"):
            return format_timestamp(round(value.timestamp() * 1000))
        if isinstance(value, dict):
            return json.dumps(value, separators=(",", ":"))
        return str(value)

    return {name: text(value) for name, value in row.items()}


def test_the_payouts_of_the_window_paid_rejected_and_reversed(shop: Api):
    rows = export(shop, "payouts", "csv", **{"from": START})
    assert all(row["event_time"] >= START for row in rows)
    seen = sorted((r["dedup_id"], r["kind"], r["user_identifier"], r["amount"], r["status"], r["status_details"],
                   bool(r["reversal"])) for r in rows)  # fmt: skip
    carol_bob = [("p-1", "affiliate_commission", BOB, "-5", "paid", "", True),
                 ("p-1", "affiliate_commission", BOB, "10", "paid", "", False),
                 ("p-1", "end_user_reward", CAROL, "-5", "paid", "", True),
                 ("p-1", "end_user_reward", CAROL, "10", "paid", "", False),
                 ("p-2", "affiliate_commission", BOB, "10", "paid", "", False),
                 ("p-2", "end_user_reward", CAROL, "10", "paid", "", False),
                 ("p-3", "affiliate_commission", BOB, "10", "paid", "", False),
                 ("p-3", "end_user_reward", CAROL, "5", "paid", "", False)]  # fmt: skip
    rejected = [r for r in rows if r["status"] == "rejected"]
    assert [(r["dedup_id"], r["user_identifier"], r["amount"], r["id"].endswith(":rejected")) for r in rejected] == [
        ("p-3", CAROL, "5", True)]  # fmt: skip
    swap = ("s-1", "end_user_reward", ALICE, "6000000", "open", "", False)
    assert [s for s in seen if s[4] != "rejected"] == sorted([*carol_bob, swap])
    token = next(r for r in rows if r["dedup_id"] == "s-1")
    assert (token["currency"], token["currency_chain_id"], token["currency_name"], token["currency_decimals"]) == (
        USDC["address"], "1", "USDC", "6")  # fmt: skip
    assert [r["event_time"] for r in rows] == sorted(r["event_time"] for r in rows)  # by event time
    assert {r["event_time"] for r in rows if r["dedup_id"] == "p-1"} == {START}


def test_far_bounds_are_all_time_and_bad_ones_a_400(shop: Api):
    everything = export(shop, "payouts", "csv")
    assert export(shop, "payouts", "csv", **{"from": "0001-01-01", "to": "9999-12-31T23:59:59Z"}) == everything
    assert export(shop, "conversions", "csv", **{"from": "0", "to": "9" * 20}) == export(shop, "conversions", "csv")
    for bad in ("1e999", "-1", "9" * 21, "2026-02-30", "10000-01-01"):
        assert "to" in str(error_of(shop.get("/exports/payouts", params={"to": bad}), 400)), bad


def test_from_is_inclusive_and_to_exclusive(shop: Api):
    within = export(shop, "payouts", "csv", **{"from": START, "to": END})
    assert {r["dedup_id"] for r in within} == {"p-1", "p-2", "p-3"}
    assert {r["dedup_id"] for r in export(shop, "payouts", "csv")} == {"p-0", "p-1", "p-2", "p-3", "s-1"}
    assert export(shop, "payouts", "csv", **{"from": END, "to": END}) == []


@pytest.mark.parametrize("fmt", ["ndjson", "parquet"])
def test_every_format_holds_the_same_rows(shop: Api, fmt: str):
    for what in ("payouts", "conversions"):
        assert export(shop, what, fmt) == export(shop, what, "csv"), what


def test_the_conversions_of_the_window_as_received(shop: Api):
    rows = export(shop, "conversions", "ndjson", **{"from": START, "to": format_timestamp(T0 + 5000)})
    assert [(r["dedup_id"], r["name"], r["user_identifier"], r["event_time"]) for r in rows] == [
        ("p-1", "purchase", CAROL, START), ("p-2", "purchase", CAROL, format_timestamp(T0 + 1000)),
        ("p-3", "purchase", CAROL, format_timestamp(T0 + 2000)), ("s-1", "swap", ALICE, END)]  # fmt: skip
    lines = shop.get("/exports/conversions", params={"format": "ndjson", "to": START}).content.splitlines()
    assert [orjson.loads(line)["args"] for line in lines] == [{"value": {"amount": "100"}}]  # Dave's, as sent


def test_an_export_holds_only_the_keys_project(world, shop: Api):
    server, admin, _ = world
    other = admin.project()
    with Api(server, admin.key(other, "service_role"), other) as api:
        assert export(api, "payouts", "ndjson") == [] and export(api, "conversions", "parquet") == []
        answer = api.get("/exports/payouts")
        assert answer.text.splitlines() == [",".join(_header("payouts"))]


def _header(what: str) -> tuple[str, ...]:
    from query_api.exports.service import CONVERSION_COLUMNS, PAYOUT_COLUMNS

    return PAYOUT_COLUMNS if what == "payouts" else CONVERSION_COLUMNS


@pytest.mark.parametrize(
    ("params", "problem"),
    [({"format": "xlsx"}, "format"), ({"from": "yesterday"}, "from"), ({"from": END, "to": START}, "from")],
)
def test_bad_parameters_are_a_400(shop: Api, params: dict, problem: str):
    answer = shop.get("/exports/payouts", params=params)
    assert problem in str(error_of(answer, 400))


def test_a_key_without_service_role_is_refused(world, shop: Api):
    server, admin, _ = world
    with Api(server, admin.key(shop.project_id), shop.project_id) as api:
        answer = api.get("/exports/conversions")
        assert answer.status_code == 403, answer.text


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_rewards_export_writes_the_apis_answer_into_a_file(shop: Api, tmp_path, fmt: str):
    out = tmp_path / f"payouts.{fmt}"
    env = {**os.environ, "REWARDS_API_KEY": shop.api_key}
    url = shop.server.urls["query" if "query" in shop.server.urls else "ingest"]  # the gateway routes it so
    command = [sys.executable, "-m", "rewards", "export", "payouts", "--url", url, "--out", str(out), "--format", fmt,
               "--from", START]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary == {"file": str(out), "bytes": out.stat().st_size, "rows": 10}  # the window's ten payouts
    answered = shop.get("/exports/payouts", params={"format": fmt, "from": START}).content
    if fmt == "csv":
        assert out.read_bytes() == answered
    else:
        assert pq.read_table(out).to_pylist() == pq.read_table(io.BytesIO(answered)).to_pylist()


def test_rewards_export_without_a_key_says_so(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "REWARDS_API_KEY"}
    command = [sys.executable, "-m", "rewards", "export", "payouts", "--out", str(tmp_path / "x.csv")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "REWARDS_API_KEY" in done.stderr and not (tmp_path / "x.csv").exists()
