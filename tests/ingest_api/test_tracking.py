"""API.md §7: tracking events, POST /events without a dedup_id (the published client's sendPageview, identifyUser and
sendEvent, with the bodies docs/fuul-sdk-7.41.0-surface.md G2 records): stored, never a 409; exact repeats of a minute
stored once; a pageview through a referral code counts a click; connect_wallet binds the tracking id to its user, who
becomes referred by the code's owner; another name pays as a conversion when configured.

On both shapes through `api`; the clicks and attributions are read from the warehouse's views (`code_traffic`), on a
server of the test's own for the embedded shape (its warehouse is read once the server is stopped)."""

import uuid

import pytest

from rewards.adapters.code_traffic import code_traffic
from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse
from rewards.domain.tracking import CodeTraffic
from tests.conftest import SERVICE, evm
from tests.support.harness import Admin, Api, Server, eventually, run_async
from tests.web.test_auth import error_of

EVM = "evm_address"
CONFIG = {
    "default_tier": "base",
    "tiers": [{"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0", "r3": "0", "r4": "0"}}],
    "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
                     "end_user_reward": {"fixed": "10"}}],
    "referral_reward": {"referrer": "50", "referred": "5"},
}  # fmt: skip


def pageview(tracking_id: str, page: str = "/home", code: str | None = None, **extra) -> dict:
    """What sendPageview sends (on a page with `?af=<code>` when given)."""
    metadata = {"tracking_id": tracking_id, "referrer_url": ""}
    if code is not None:
        metadata |= {"affiliate_id": code, "referrer": code}
    return {"name": "pageview", "args": {"page": page, "locationOrigin": "https://app.example"},
            "metadata": metadata, **extra}  # fmt: skip


def connect_wallet(tracking_id: str, n: int, **extra) -> dict:
    """What identifyUser sends."""
    args = {"page": "/home", "locationOrigin": "https://app.example"}
    user = {"identifier": evm(n), "identifier_type": EVM}
    return {"name": "connect_wallet", "user": user, "args": args, "metadata": {"tracking_id": tracking_id}, **extra}


def send_event(tracking_id: str, name: str, args: dict | None = None, **extra) -> dict:
    """What sendEvent sends: no user."""
    return {"name": name, "args": args or {}, "metadata": {"tracking_id": tracking_id}, **extra}


def who(n: int) -> dict:
    return {"user_identifier": evm(n), "user_identifier_type": EVM}


def ingested(api, body: dict, **params) -> int:
    response = api.post("/events", json=body, params=params)
    assert response.status_code == 201, response.text
    return response.json()["ingested_events"]


def code_of(api, owner: int) -> str:
    created = api.post("/referral_codes", json={**who(owner), "quantity": 1})
    assert created.status_code == 201, created.text
    return created.json()[0]["code"]


def points(api, n: int) -> dict:
    totals = api.get(f"/payouts/totals/{evm(n)}", params={"identifier_type": EVM}).json()
    return {kind: amount for kind, amount in totals["by_kind"].items() if amount != "0"}


def settled(api) -> None:
    """Everything published so far is written (tests.support.harness.Api.settle)."""
    api.settle()


# -- stored, never an error for lack of a dedup_id, repeats once ---------------------------------------------------


def test_the_clients_three_bodies_are_stored_and_exact_repeats_count_once(make_api):
    api = make_api("SendTrackingEvent")
    assert ingested(api, pageview("TRK-1")) == 1
    assert ingested(api, pageview("TRK-1")) == 0  # the same (name, tracking id, user, page) within 60 s
    assert ingested(api, pageview("TRK-1", page="/other")) == 1
    assert ingested(api, pageview("TRK-2")) == 1  # another browser
    signed = {"signature": "0x" + "5" * 130, "signature_message": "Accept referral", "signature_public_key": "pk",
              "account_chain_id": 8453}  # fmt: skip
    assert ingested(api, connect_wallet("TRK-1", 1, **signed)) == 1
    assert ingested(api, connect_wallet("TRK-1", 1, **signed)) == 0
    assert ingested(api, connect_wallet("TRK-1", 2)) == 1  # another user
    assert ingested(api, send_event("TRK-1", "my_event", {"value": 10})) == 1  # the JSDoc's bare amount
    assert ingested(api, send_event("TRK-1", "my_event", {"value": 10})) == 0
    assert ingested(api, send_event("TRK-1", "my_event", {"value": 11})) == 1  # another event, not a repeat
    assert ingested(api, pageview("TRK-1", page="/other", code="NOCODE1")) == 1  # names a code: not the same
    settled(api)


def test_a_body_with_a_dedup_id_is_still_a_section_3_event(make_api):
    api = make_api("SendTrackingEvent")
    event = {**who(1), "name": "purchase", "dedup_id": "d-1"}
    assert api.post("/events", json=event).status_code == 201
    assert error_of(api.post("/events", json=event), 409) == "Event already exists"
    message = error_of(api.post("/events", json={**event, "dedup_id": "d-2", "metadata": {"tracking_id": "T"},
                                                 "signature": "0x1"}), 400)  # fmt: skip
    assert message == "property signature should not exist"


def test_what_is_refused(make_api):
    api = make_api("SendTrackingEvent")
    needs = "dedup_id is required, or metadata.tracking_id for a tracking event (API.md §7)"
    assert error_of(api.post("/events", json={"name": "x"}), 400) == needs
    assert error_of(api.post("/events", json={"name": "x", "metadata": {"referrer": "A"}}), 400) == needs
    bad = [
        ({**pageview("T"), "extra": 1}, "property extra should not exist"),
        ({**pageview("T"), "name": ""}, "name must be at least 1 characters"),
        (pageview("T\n"), "metadata.tracking_id must not contain control characters"),
        (pageview("T" * 256), "metadata.tracking_id must be at most 255 characters"),
        ({**pageview("T"), "metadata": {"tracking_id": 7}}, "metadata.tracking_id must be a string"),
        ({**connect_wallet("T", 1), "user": {"identifier": "0x12", "identifier_type": EVM}}, "user: "),
        ({**send_event("T", "x"), "user_address": "nope"}, "user_address: "),
        (send_event("T", "x", {"value": "1e5"}), "args.value must be a plain non-negative decimal"),
        (send_event("T", "x", {"revenue": {"amount": -1}}), "args.revenue.amount must be a plain"),
        (send_event("T", "x", {"value": [1]}), "args.value must be an amount, or an object with an amount"),
        ({**send_event("T", "x"), "account_chain_id": -1}, "account_chain_id must not be less than 0"),
        ({**send_event("T", "x"), "signature": "s" * 1025}, "signature must be at most 1024 characters"),
        (send_event("T", "x", {"blob": "x" * 17000}), "event must not be larger than 16384 bytes"),
        (send_event("T", "x", {"deep": _nested(40)}), "event.args must not be nested deeper than 32 levels"),
    ]
    for body, message in bad:
        assert str(error_of(api.post("/events", json=body), 400)).startswith(message), (body, message)


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_the_multi_project_form_must_name_the_keys_project(make_api, project):
    api = make_api("SendTrackingEvent")
    dashed = str(uuid.UUID(project))
    body = {**pageview("TRK-M"), "project_id": project}
    body["metadata"]["project_id"] = project
    assert ingested(api, body, project_id=project) == 1
    assert ingested(api, {**body, "project_id": dashed.upper(), "args": {"page": "/b"}}, project_id=dashed) == 1
    other = uuid.uuid4().hex
    for params, changed in (({"project_id": other}, {}), ({}, {"project_id": other}),
                            ({}, {"metadata": {"tracking_id": "T", "project_id": other}})):  # fmt: skip
        response = api.post("/events", json={**body, **changed}, params=params)
        assert error_of(response, 403) == "project_id is not this key's project"
    # A §3 event (with a dedup_id) ignores an unknown query parameter, project_id included (API.md §0).
    event = {"name": "signup", "dedup_id": f"q-{other}", "user_identifier": f"0x{1:040x}",
             "user_identifier_type": "evm_address"}  # fmt: skip
    assert api.post("/events", json=event, params={"project_id": other}).status_code == 201


def test_a_key_needs_the_tracking_scope(make_api):
    assert make_api().post("/events", json=pageview("T")).status_code == 403
    assert make_api("referral_codes:read").post("/events", json=pageview("T")).status_code == 403


# -- the referral a tracked code makes -----------------------------------------------------------------------------


def test_connect_wallet_after_a_pageview_through_a_code_refers_the_user(api):
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    code = code_of(api, 1)
    assert ingested(api, pageview("TRK-A", code=code.lower())) == 1  # codes match case-insensitively
    assert ingested(api, connect_wallet("TRK-A", 2, signature="0xsig", signature_message="I accept")) == 1
    status = api.get("/referral_codes/status", params=who(2)).json()
    assert (status["referred"], status["code"], status["referrer_identifier"]) == (True, code, evm(1))
    record = api.get(f"/referral_codes/{code}").json()
    assert record["current_uses"] == 1 and [u["identifier"] for u in record["used_by"]] == [evm(2)]
    # the code use's referral reward, as PATCH /referral_codes/{code}/use pays it
    eventually(lambda: _equal(points(api, 1), {"referral_reward": "50"}))
    assert points(api, 2) == {"referral_reward": "5"}

    # The purchase sendEvent sends carries no user: the tracking id's (bound by connect_wallet) is its user.
    value = {"value": {"amount": "200", "currency": {"name": "USD"}}}
    assert ingested(api, send_event("TRK-A", "purchase", value)) == 1
    eventually(lambda: _equal(points(api, 1), {"referral_reward": "50", "affiliate_commission": "20"}))
    assert points(api, 2) == {"referral_reward": "5", "end_user_reward": "10"}
    event_status = {**who(2), "event_name": "purchase"}
    assert api.get("/events/status", params=event_status).json() == {"created": True, "paid": True}


def _equal(found, expected) -> None:
    assert found == expected


def test_a_connect_wallet_the_rules_refuse_is_stored_and_refers_nobody(api):
    code = code_of(api, 1)
    other = code_of(api, 3)
    assert api.patch(f"/referral_codes/{other}/use", json=who(2)).status_code == 200  # 2 is referred by 3 already
    for tracking_id, n in (("TRK-R", 2), ("TRK-O", 1)):  # already referred; the owner on their own code
        assert ingested(api, pageview(tracking_id, code=code)) == 1
        assert ingested(api, connect_wallet(tracking_id, n)) == 1
    assert api.get("/referral_codes/status", params=who(2)).json()["code"] == other
    assert api.get("/referral_codes/status", params=who(1)).json() == {"referred": False}
    assert api.get(f"/referral_codes/{code}").json()["current_uses"] == 0

    exhausted = api.post("/referral_codes", json={**who(4), "quantity": 1, "max_uses": 1}).json()[0]["code"]
    assert api.patch(f"/referral_codes/{exhausted}/use", json=who(5)).status_code == 200
    assert ingested(api, pageview("TRK-X", code=exhausted)) == 1
    assert ingested(api, connect_wallet("TRK-X", 6)) == 1
    assert api.get("/referral_codes/status", params=who(6)).json() == {"referred": False}


def test_events_without_a_user_or_a_configured_name_pay_nothing(api):
    assert api.put("/projects/config", json=CONFIG).status_code == 200
    value = {"value": {"amount": "200", "currency": {"name": "USD"}}}
    assert ingested(api, send_event("TRK-N", "purchase", value)) == 1  # no user, no connect_wallet: stored only
    assert ingested(api, connect_wallet("TRK-N", 7)) == 1
    assert ingested(api, send_event("TRK-N", "not_configured", value)) == 1
    user = {"identifier": evm(8), "identifier_type": EVM}
    assert ingested(api, {**send_event("TRK-U", "purchase", {"value": 30}), "user": user}) == 1
    settled(api)
    assert points(api, 7) == {} and points(api, 8) == {"end_user_reward": "10"}
    assert api.get("/events/status", params={**who(7), "event_name": "purchase"}).json()["created"] is False


# -- clicks and attributions: the views' figures -------------------------------------------------------------------


def read_traffic(server, project: str, codes: list[str]) -> dict[str, CodeTraffic]:
    """The codes' figures in the server's warehouse: the production shape's ClickHouse server; an embedded server's
    chdb warehouse once the server is stopped (one process at a time opens it: the server must be the test's own)."""

    async def read():
        if server.shape == "embedded":
            server.stop()
            warehouse = ChdbWarehouse(server.data_dir / "warehouse")
        else:
            warehouse = await ClickHouseWarehouse.connect(server.env["CLICKHOUSE_URL"])
        try:
            return await code_traffic(warehouse, project, codes)
        finally:
            await warehouse.close()

    return run_async(read())


@pytest.fixture(params=["embedded", "production"])
def readable_server(request, tmp_path):
    """A server whose warehouse read_traffic reads: an embedded server of the test's own, or the production one."""
    if request.param == "production":
        yield request.getfixturevalue("production_server")
        return
    server = Server(tmp_path / "data").start()
    yield server
    server.stop()


@pytest.fixture
def readable(readable_server):
    admin = Admin(readable_server)
    project = admin.project()
    api = Api(readable_server, admin.key(project, SERVICE), project)
    yield api
    api.close()


def test_clicks_and_attributions_are_figures_of_the_views(readable):
    api = readable
    code, other, unused = code_of(api, 1), code_of(api, 2), code_of(api, 3)
    assert ingested(api, pageview("TRK-1", code=code)) == 1  # a click
    assert ingested(api, pageview("TRK-1", code=code)) == 0  # its repeat: none
    assert ingested(api, pageview("TRK-1", page="/pricing", code=code)) == 1  # another page: a click
    assert ingested(api, pageview("TRK-2", code=code.lower())) == 1  # another browser
    assert ingested(api, pageview("TRK-3", code=other)) == 1
    assert ingested(api, pageview("TRK-4", code="NOPE000")) == 1  # no such code: no click
    assert ingested(api, pageview("TRK-5")) == 1
    assert ingested(api, connect_wallet("TRK-1", 4)) == 1  # referred through `code`: an attribution
    assert ingested(api, connect_wallet("TRK-2", 4)) == 1  # already referred: none
    assert ingested(api, connect_wallet("TRK-3", 2)) == 1  # the owner of `other`: none
    assert api.get("/referral_codes/status", params=who(4)).json()["code"] == code
    settled(api)
    assert read_traffic(api.server, api.project_id, [code, other, unused, "NOPE000"]) == {
        code: CodeTraffic(clicks=3, attributions=1),
        other: CodeTraffic(clicks=1, attributions=0),
        unused: CodeTraffic(),
        "NOPE000": CodeTraffic(),
    }
