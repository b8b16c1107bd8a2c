"""`rewards move-to-production` (docs/operations.md, "Moving to production") run as an operator runs it: a data dir
filled by `rewards demo` and by every program feature (caps, a budget, approvals, a reversal, the blocklist, a
webhook endpoint, an erasure) is read through every GET the API publishes; `rewards serve` stops; the data dir moves
into a production shape of its own (a Kafka, a Redis and a ClickHouse database no other test uses); every GET answers
the same there. Then both shapes take the same further calls (the data dir is left as it was, so `rewards serve`
starts on it again) and still answer the same: the referral graph, the caps' and budget's counters, the held payouts
and the dedup marks came along, not only the figures."""

import http.server
import json
import os
import re
import subprocess
import sys
import threading
import uuid
from urllib.parse import urlsplit

import pytest

from rewards.devengines import clickhouse
from tests.support.cli import rewards
from tests.support.harness import Api, ProductionServer, Server, eventually, free_port
from tests.support.real_engines import _own_engine

# What each shape stamps by its own clock or draws at random: apart when two shapes take the same calls.
TIME_FIELDS = {"created_at", "processed_at", "updated_at", "claimed_at", "next_attempt_at", "expires_at", "used_at",
               "date_joined", "date", "happened_at", "reversed_at"}  # fmt: skip
# Ids drawn at random (a reversal's, a code use's and so its payouts', a webhook message's): 32 hex digits, not
# within an address.
DRAWN_ID = re.compile(r"(?<![0-9a-fx])[0-9a-f]{32}(?![0-9a-f])")
ANSWERED_AT = "calculated_at"  # when a leaderboard was computed: the time of the request


@pytest.fixture(scope="module")
def own_kafka(tmp_path_factory):
    """Its own broker: the moved workers must not share a consumer group (or a topic) with the session's stack."""
    yield from _own_engine("kafka", tmp_path_factory.mktemp("moved-kafka"))


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory):
    yield from _own_engine("redis", tmp_path_factory.mktemp("moved-redis"))


@pytest.fixture(scope="module")
def receiver():
    """A webhook endpoint answering 204 to every delivery (private addresses allowed for the test's servers)."""

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rewards", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})  # fmt: skip


def _engines(own_kafka, own_redis, clickhouse_url) -> dict[str, str]:
    database = f"moved_{uuid.uuid4().hex[:8]}"
    admin = clickhouse.connect(clickhouse_url)
    admin.command(f"CREATE DATABASE {database}")
    admin.close()
    url = urlsplit(clickhouse_url)._replace(path=f"/{database}").geturl()
    return {"KAFKA_BOOTSTRAP_SERVERS": own_kafka.url, "REDIS_URL": own_redis.url, "CLICKHOUSE_URL": url}


def _drop(url: str) -> None:
    admin = clickhouse.connect(urlsplit(url)._replace(path="").geturl())
    admin.command(f"DROP DATABASE IF EXISTS {urlsplit(url).path.strip('/')}")
    admin.close()


# -- the data dir: the demo, then every program feature ------------------------------------------------------------


def _fill(api: Api, receiver: str) -> dict:
    """Add to the demo's project what the demo does not make; what the reads and the further calls need."""
    config = api.get("/projects/config").json()
    config.pop("claim_signer_address", None)
    config |= {
        # (a user's own payouts: a user's conversions keep one partition, so the same calls fill the cap in the same
        # order on both shapes; a referrer's from several users' conversions would be in either order in production)
        "caps": [{"applies_to": "end_user", "currency": "point", "amount": "30", "window": "30d"}],
        "budgets": [{"currency": "point", "amount": "100000"}],
        "approval": {"currencies": ["point"], "above": "30"},
    }
    assert api.put("/projects/config", json=config).status_code == 200, api.get("/projects/config").text
    hook = api.post("/webhooks", json={"url": receiver, "events": ["reward.earned", "reward.reversed"]})
    assert hook.status_code == 201, hook.text
    affiliates = api.get("/affiliates", params={"per_page": 100}).json()["results"]
    referred = _referred_users(api, affiliates)
    blocked, erased = referred[-1], referred[-2]
    assert api.put(f"/projects/blocklist/{blocked}", params={"identifier_type": "evm_address"},
                   json={"reason": "chargebacks"}).status_code == 200  # fmt: skip
    _convert(api, referred[:6], "before")
    api.settle(timeout_s=60)
    held = api.get("/payouts/pending-approval").json()["results"]
    assert len(held) >= 2, held
    assert api.post("/payouts/pending-approval/approve", json={"payout_ids": [held[0]["id"]]}).status_code == 200
    reversal = {"reversals": [{"dedup_id": "before-0", "reason": "refund", "fraction": "0.25"}]}
    assert api.post("/events/reversals", json=reversal).json() == {"reversed": 1}
    erasure = api.post("/users/erasures", json={"user_identifier": erased, "user_identifier_type": "evm_address"})
    assert erasure.status_code == 202, erasure.text
    api.settle(timeout_s=60)
    erasure_id = erasure.json()["erasure_id"]
    eventually(lambda: _equal(api.get(f"/users/erasures/{erasure_id}").json(), {"status": "done"}), timeout_s=60)
    deliveries = f"/webhooks/{hook.json()['id']}/deliveries"
    eventually(lambda: _none_pending(api.get(deliveries, params={"page_size": 100}).json()), timeout_s=60)
    return {"affiliates": affiliates, "users": referred[:6], "blocked": blocked, "erasure_id": erasure_id,
            "webhook_id": hook.json()["id"], "held": [h["id"] for h in held[1:]]}  # fmt: skip


def _referred_users(api: Api, affiliates: list[dict]) -> list[str]:
    """End users the demo's affiliates referred (from the portal's referral trees), in a stable order."""
    users = set()

    def walk(node: dict) -> None:
        for child in node.get("children", []):
            users.add(child["user_identifier"])
            walk(child)

    for affiliate in affiliates:
        walk(
            api.get("/affiliate-portal/referral-tree", params={"user_identifier": affiliate["user_identifier"]}).json()
        )
    return sorted(users - {a["user_identifier"] for a in affiliates})


def _convert(api: Api, users: list[str], prefix: str) -> None:
    value = lambda n: {"amount": f"{400 + 37 * n}.25", "currency": {"name": "USD"}}  # noqa: E731
    events = [{"name": "purchase", "user_identifier": user, "user_identifier_type": "evm_address",
               "dedup_id": f"{prefix}-{n}", "args": {"value": value(n)}} for n, user in enumerate(users)]  # fmt: skip
    answer = api.post("/events/batch", json={"events": events})
    assert answer.status_code == 200 and answer.json()["ingested_events"] == len(events), answer.text


def _none_pending(page: dict) -> None:
    assert page["results"] and all(d["status"] != "pending" for d in page["results"]), page


def _equal(found, expected) -> None:
    assert found == expected, found


# -- every read --------------------------------------------------------------------------------------------------


def _requests(made: dict, filled: dict) -> list[tuple[str, dict]]:
    """A request of every GET of the API (several where a parameter changes what it answers), naming the project's
    data. (test_every_get_is_read checks that none is missing.)"""
    top = [a["user_identifier"] for a in filled["affiliates"][:4]]
    users = [*top, *filled["users"], filled["blocked"]]
    code = filled["affiliates"][0]["codes"][0]
    who = [{"user_identifier": u, "user_identifier_type": "evm_address"} for u in users]
    window = {"from": "2020-01-01T00:00:00Z", "to": "2100-01-01T00:00:00Z"}
    hook = filled["webhook_id"]
    reads = [
        ("/affiliates", {"per_page": 100}), ("/affiliates", {"per_page": 10, "sort_by": "total_volume"}),
        ("/affiliate-portal/total-stats", {}), ("/conversions", {}), ("/projects/config", {}),
        ("/projects/budgets", {}), ("/projects/blocklist", {}), ("/payouts/pending-approval", {"page_size": 100}),
        ("/payouts/summary", {"currency": "point"}), ("/payouts/terms-by-tier", {}),
        ("/leaderboard/referred", {"page_size": 100}), ("/console/claim-checks", {}), ("/console/integrity", {}),
        ("/console/health", {}), ("/console/points", {"hours": 720}), ("/dead-letters", {}), ("/webhooks", {}),
        (f"/webhooks/{hook}", {}), (f"/webhooks/{hook}/deliveries", {"page_size": 100}),
        (f"/users/erasures/{filled['erasure_id']}", {}), (f"/referral_codes/{code}", {}),
        (f"/affiliates/codes/{code}", {}), (f"/affiliates/codes/{code}/availability", {}),
        ("/claim-checks/rewards-payouts", {"page_size": 100}), ("/claim-checks/rewards-payouts", {"status": "claimed"}),
        ("/exports/payouts", {**window, "format": "ndjson"}), ("/exports/conversions", {**window, "format": "csv"}),
        ("/payouts/leaderboard/referred-volume", {"user_identifiers": ",".join(top)}),
        ("/claimable-rewards", {"user_identifier": top[0], "user_identifier_type": "evm_address",
                                "project_id": made["project_id"]}),
        ("/events/status", {"dedup_id": "before-0"}), ("/events/status", {"dedup_id": "demo-purchase-000001"}),
        ("/events/status", {**who[4], "event_name": "purchase"}),
    ]  # fmt: skip
    for board in ("payouts", "points", "revenue", "users", "volume"):
        reads.append((f"/payouts/leaderboard/{board}", {"page_size": 100}))
    for affiliate in top:
        portal = {"user_identifier": affiliate}
        reads += [
            ("/affiliate-portal/new-traders", portal), ("/affiliate-portal/referral-tree", portal),
            ("/affiliate-portal/paid-volumes-by-level", portal), ("/affiliate-portal/stats", portal),
            ("/affiliate-portal/stats-breakdown", {**portal, "group_by": "day"}),
            (f"/affiliates/{affiliate}", {"identifier_type": "evm_address"}),
            ("/referral_codes", {**portal, "user_identifier_type": "evm_address"}),
        ]  # fmt: skip
    for person in who:
        user = person["user_identifier"]
        reads += [
            ("/claim-checks", person), ("/claim-checks/claim-history", person), ("/claim-checks/totals", person),
            ("/payouts/by-referrer", person), ("/payouts/pending-acceptance", person),
            (f"/payouts/totals/{user}", {"identifier_type": "evm_address"}), ("/referral_codes/status", person),
            ("/user/referrer", person),
        ]  # fmt: skip
        for kind in ("point", "onchain-currency"):
            listing = {**person, "type": kind, "page_size": 100}
            reads += [
                ("/payouts", listing),
                ("/payouts/movements", listing),
                ("/payouts", {**listing, "group_by": "user"}),
            ]
    return reads


def _answers(api: Api, requests: list[tuple[str, dict]]) -> dict:
    answers = {}
    for path, params in requests:
        response = api.get(path, params=params)
        body = response.text if path.startswith("/exports/") else _stable(path, response.json())
        answers[f"{path} {json.dumps(params, sort_keys=True)}"] = (response.status_code, body)
    health = api.get(api.server.urls["ingest"] + "/health")
    answers["/health"] = (health.status_code, health.json()["status"])
    return answers


def _settled_answers(api: Api, requests: list[tuple[str, dict]]) -> dict:
    """The answers once two readings in a row agree: every write of the calls made is visible."""
    previous, answers = None, _answers(api, requests)
    while answers != previous:
        previous, answers = answers, _answers(api, requests)
    return answers


def _stable(path: str, body):
    """What of an answer stays put while nothing happens: the console's health figures per second and per minute are
    of a window ending now, and its backlog is measured only where the log is (null in the production query API)."""
    if path == "/console/health":
        return {"project_name": body["project_name"], "dead_letters": body["dead_letters"]}
    if isinstance(body, dict):
        body.pop(ANSWERED_AT, None)
    return body


def _without_times(value):
    """An answer without what each shape stamps by its own clock or draws; lists in a canonical order (two rows of
    the same time are listed in the order of their drawn ids)."""
    if isinstance(value, str):
        return DRAWN_ID.sub("…", value)
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k not in TIME_FIELDS}
    if isinstance(value, list | tuple):
        return sorted((_without_times(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def _differences(before: dict, after: dict) -> list[str]:
    """Where two sets of answers differ: each request's first differing place, with both values."""
    found = []
    for request, answer in before.items():
        if answer != after.get(request):
            found.append(f"{request} at {_first_difference(answer, after.get(request))}")
    return found


def _first_difference(one, other, where: str = "") -> str:
    if isinstance(one, dict) and isinstance(other, dict) and one.keys() == other.keys():
        key = next(k for k in one if one[k] != other[k])
        return _first_difference(one[key], other[key], f"{where}.{key}")
    if isinstance(one, list | tuple) and isinstance(other, list | tuple) and len(one) == len(other):
        n = next(n for n in range(len(one)) if one[n] != other[n])
        return _first_difference(one[n], other[n], f"{where}[{n}]")
    return f"{where or '.'}: {str(one)[:300]} != {str(other)[:300]}"


# -- the move -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moved(tmp_path_factory, own_kafka, own_redis, clickhouse_url, receiver):
    data_dir = tmp_path_factory.mktemp("moving") / "data"
    env = {"REWARDS_WEBHOOKS_ALLOW_PRIVATE": "1"}
    embedded = Server(data_dir, env).start()
    try:
        demo = _cli("demo", "--url", embedded.url, "--data-dir", str(data_dir), "--conversions", "100",
                    env={"REDIS_URL": ""})  # fmt: skip
        assert demo.returncode == 0, demo.stderr
        made = json.loads(demo.stdout)
        with Api(embedded, made["api_key"], made["project_id"]) as api:
            filled = _fill(api, receiver)
            requests = _requests(made, filled)
            before = _settled_answers(api, requests)
            document = api.get(embedded.url + "/openapi.json").json()
    finally:
        embedded.stop()
    engines = _engines(own_kafka, own_redis, clickhouse_url)
    migrated = _cli("migrate", env=engines)
    assert migrated.returncode == 0, migrated.stderr
    move = _cli("move-to-production", "--data-dir", str(data_dir), env=engines)
    production = ProductionServer(engines, env, webhooks=True).start()
    try:
        yield {"data_dir": data_dir, "env": env, "made": made, "filled": filled, "openapi": document,
               "requests": requests, "before": before, "move": move, "production": production}  # fmt: skip
    finally:
        production.stop()
        _drop(engines["CLICKHOUSE_URL"])


def test_the_move_copies_every_table_and_prints_what(moved):
    assert moved["move"].returncode == 0, moved["move"].stderr
    printed = json.loads(moved["move"].stdout)
    assert printed["warehouse"]["payouts"] > 100 and printed["state"]["codes+code_names"] > 0


def test_every_get_answers_as_it_did_before_the_move(moved):
    refused = {request: answer for request, answer in moved["before"].items() if answer[0] != 200}
    assert refused == {}, refused  # (answers to compare, not errors)
    made = moved["made"]
    with Api(moved["production"], made["api_key"], made["project_id"]) as api:
        after = _answers(api, moved["requests"])
    assert not _differences(moved["before"], after), "\n".join(_differences(moved["before"], after))


def test_every_get_is_read(moved):
    """The requests above name every GET path of the OpenAPI document (a new endpoint must be added there)."""
    published = {path for path, ops in moved["openapi"]["paths"].items() if "get" in ops} - {"/health"}
    patterns = {path: re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$") for path in published}
    read = {"/api/v1" + path for path, _ in moved["requests"]}
    assert {path for path, pattern in patterns.items() if not any(map(pattern.match, read))} == set()


def _go_on(api: Api, filled: dict, newcomer: str) -> None:
    """The same further calls, made to either shape: what they answer and pay depends on the state moved (dedup marks,
    the referral graph, the caps' and the budget's counters, reversed shares, held payouts, the blocklist)."""
    again = {"name": "purchase", "user_identifier": filled["users"][1], "user_identifier_type": "evm_address",
             "dedup_id": "before-1", "args": {"value": {"amount": "401.25", "currency": {"name": "USD"}}}}  # fmt: skip
    assert api.post("/events/batch", json={"events": [again]}).json() == {"ingested_events": 0}
    code = filled["affiliates"][0]["codes"][0]
    used = api.patch(
        f"/referral_codes/{code}/use", json={"user_identifier": newcomer, "user_identifier_type": "evm_address"}
    )
    assert used.status_code == 200, used.text
    _convert(api, [*filled["users"], filled["blocked"], newcomer], "after")
    # Written before what follows: the production shape spreads conversions over partitions, and a reversal or an
    # approval on the project's own one could otherwise take or give back room under the cap before them.
    api.settle(timeout_s=60)
    reversals = [{"dedup_id": "before-0", "reason": "fraud", "fraction": "0.25"},
                 {"dedup_id": "before-1", "reason": "chargeback", "fraction": "0.5"}]  # fmt: skip
    assert api.post("/events/reversals", json={"reversals": reversals}).json() == {"reversed": 2}
    api.settle(timeout_s=60)  # (the same: the room a reversal gives back, before the approval takes some)
    decided = {"payout_ids": filled["held"][:1]}
    assert api.post("/payouts/pending-approval/approve", json=decided).json() == {"approved": 1}
    assert api.post("/payouts/pending-approval/reject", json={"payout_ids": filled["held"][1:2]}).json() == {
        "rejected": 1
    }
    api.settle(timeout_s=60)


def test_both_shapes_go_on_alike_after_the_move(moved):
    """The data dir is left as it was: `rewards serve` starts on it again, and it and the production shape take the
    same further calls; every GET then answers alike on both (times apart: each shape stamps its own)."""
    made, filled = moved["made"], moved["filled"]
    newcomer = "0x" + "c0ffee" * 6 + "0001"
    person = {"user_identifier": newcomer, "user_identifier_type": "evm_address"}
    requests = [*moved["requests"], ("/user/referrer", person), ("/payouts/movements", {**person, "type": "point"})]
    requests = [(path, params) for path, params in requests if not path.startswith("/exports/")]  # (2 a minute)
    embedded = Server(moved["data_dir"], moved["env"]).start()
    try:
        with Api(embedded, made["api_key"], made["project_id"]) as here, \
                Api(moved["production"], made["api_key"], made["project_id"]) as there:  # fmt: skip
            for api in (here, there):
                _go_on(api, filled, newcomer)

            def alike() -> None:
                one, other = (_without_times(_answers(api, requests)) for api in (here, there))
                assert not _differences(one, other), "\n".join(_differences(one, other))

            eventually(alike, timeout_s=30)
    finally:
        embedded.stop()


# -- what the command refuses, before anything is written -----------------------------------------------------------


def _refused(data_dir, env: dict) -> str:
    done = rewards("move-to-production", data_dir=data_dir, env=env)
    assert done.returncode == 1 and done.stdout == "", done.stdout
    return json.loads(done.stderr.strip().splitlines()[-1])["error"]


ENGINES_SET = {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9", "CLICKHOUSE_URL": "http://127.0.0.1:9/none",
               "REDIS_URL": "redis://127.0.0.1:9/0"}  # never reached  # fmt: skip


def test_a_data_dir_in_use_without_engines_or_with_a_log_not_drained_is_refused(tmp_path):
    from rewards.adapters.embedded.sqlite_db import SqliteDatabase
    from runtime.data_dir import lock_data_dir
    from runtime.wiring import state_path
    from tests.support.harness import run_async

    assert "no embedded data" in _refused(tmp_path / "none", ENGINES_SET) and not (tmp_path / "none").exists()
    database = SqliteDatabase(state_path(tmp_path))
    run_async(database.run(lambda c: c.execute(
        "INSERT INTO outbox (project_id, payload, created_ms) VALUES ('p', x'5b5d', 0)")))  # fmt: skip
    run_async(database.close())
    assert "set KAFKA_BOOTSTRAP_SERVERS, CLICKHOUSE_URL and REDIS_URL" in _refused(tmp_path, {})
    sharded = {**ENGINES_SET, "REWARDS_CLICKHOUSE_CLUSTER": "rewards"}
    assert "sharded warehouse (REWARDS_CLICKHOUSE_CLUSTER) is not supported" in _refused(tmp_path, sharded)
    assert "messages not yet written: 1;" in _refused(tmp_path, ENGINES_SET)
    with lock_data_dir(tmp_path):
        assert "`rewards serve` is running on" in _refused(tmp_path, ENGINES_SET)
