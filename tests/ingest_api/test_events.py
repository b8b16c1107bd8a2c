"""API.md §3: batches, dedup, atomicity, Idempotency-Key, single events, status, rate limits."""

from tests.conftest import event
from tests.web.test_auth import error_of


def batch(*events) -> dict:
    return {"events": list(events)}


def test_batch_counts_new_events_and_processes_them(api):
    response = api.post("/events/batch", json=batch(event("a"), event("b")))
    assert response.status_code == 200
    assert response.json() == {"ingested_events": 2}
    assert response.headers["X-RateLimit-Limit"] == "10"
    assert response.headers["X-RateLimit-Remaining"] == "9"
    api.wait_processed("a", "b")


def test_dedup_inside_a_batch_counts_once_and_first_wins(api):
    first = event("same", name="signup")
    second = event("same", name="purchase")
    assert api.post("/events/batch", json=batch(first, second)).json() == {"ingested_events": 1}
    api.wait_processed("same")
    user = {"user_identifier": first["user_identifier"], "user_identifier_type": "evm_address"}
    assert api.get("/events/status", params={**user, "event_name": "signup"}).json() == {"created": True, "paid": False}
    no_config = {"created": False, "paid": False}  # the project has no payout configuration: nothing pays
    assert api.get("/events/status", params={**user, "event_name": "purchase"}).json() == no_config


def test_100_sent_with_5_known_ingests_95(api):
    assert api.post("/events/batch", json=batch(*[event(f"k{i}") for i in range(5)])).json()["ingested_events"] == 5
    events = [event(f"k{i}") for i in range(100)]
    assert api.post("/events/batch", json=batch(*events)).json() == {"ingested_events": 95}


def test_a_bad_event_rejects_the_whole_batch_and_nothing_is_stored(api):
    events = [event("ok1"), {"name": "x", "dedup_id": "bad3"}, event("ok2"), {**event("bad7"), "name": 5}]
    message = error_of(api.post("/events/batch", json=batch(*events)), 400)
    assert "events[1].user_identifier is required" in message
    assert "events[3].name must be a string" in message
    for dedup_id in ("ok1", "ok2"):
        assert api.get("/events/status", params={"dedup_id": dedup_id}).json()["status"] == "not_found"
    assert api.post("/events/batch", json=batch(event("ok1"))).json() == {"ingested_events": 1}


def test_event_validation_rules(api):
    assert error_of(api.post("/events/batch", json=batch({**event("x"), "extra": 1})), 400) == (
        "property events[0].extra should not exist"
    )
    big = event("big", metadata={"blob": "x" * 17000})
    assert "16384 bytes" in error_of(api.post("/events/batch", json=batch(big)), 400)
    error_of(api.post("/events/batch", json=batch(event("bad-user", user="0x123"))), 400)
    assert error_of(api.post("/events/batch", json={"events": []}), 400) == "events must contain at least 1 element"
    error_of(api.post("/events/batch", json=batch(*[event(f"m{i}") for i in range(101)])), 400)
    error_of(api.post("/events/batch", json=batch(event("t", timestamp="yesterday"))), 400)
    error_of(api.post("/events/batch", json=batch(event("v", args={"value": {"amount": "abc"}}))), 400)
    error_of(api.post("/events/batch", content=b"not json", headers={"Content-Type": "application/json"}), 400)


def test_nested_user_form_and_timestamps_are_accepted(api):
    nested = {"name": "signup", "dedup_id": "n1", "user": {"identifier": "A@B.co", "identifier_type": "email"}}
    timed = event("n2", timestamp=1767225600000)
    iso = event("n3", timestamp="2026-01-01T00:00:00.123Z")
    assert api.post("/events/batch", json=batch(nested, timed, iso)).json() == {"ingested_events": 3}
    params = {"user_identifier": "a@b.co", "user_identifier_type": "email", "event_name": "signup"}
    assert api.get("/events/status", params=params).json() == {"created": True, "paid": False}


def test_idempotency_key_replays_and_conflicts(api):
    headers = {"Idempotency-Key": "retry-1"}
    body = batch(event("i1"), event("i2"))
    first = api.post("/events/batch", json=body, headers=headers)
    again = api.post("/events/batch", json=body, headers=headers)
    assert first.json() == again.json() == {"ingested_events": 2}
    other = api.post("/events/batch", json=batch(event("i3")), headers=headers)
    error_of(other, 409)
    assert api.get("/events/status", params={"dedup_id": "i3"}).json()["status"] == "not_found"


def test_duplicates_by_dedup_id_are_never_an_error_in_batches(api):
    api.post("/events/batch", json=batch(event("d1")))
    assert api.post("/events/batch", json=batch(event("d1"))).json() == {"ingested_events": 0}


def test_single_event_201_then_409(make_api):
    api = make_api("SendTrackingEvent")
    response = api.post("/events", json=event("s1"))
    assert response.status_code == 201 and response.json() == {"ingested_events": 1}
    assert error_of(api.post("/events", json=event("s1")), 409) == "Event already exists"
    error_of(api.post("/events", json={"name": "x"}), 400)


def test_status_by_dedup_id_and_by_user_and_name(api):
    assert api.get("/events/status", params={"dedup_id": "never"}).json() == {
        "dedup_id": "never",
        "status": "not_found",
    }
    api.post("/events/batch", json=batch(event("st1")))
    assert api.get("/events/status", params={"dedup_id": "st1"}).json()["status"] in ("accepted", "processed")
    api.wait_processed("st1")
    error_of(api.get("/events/status"), 400)
    error_of(
        api.get("/events/status", params={"user_identifier": "x", "user_identifier_type": "email", "event_name": "a"}),
        400,
    )


def test_the_11th_batch_in_a_minute_is_429_with_retry_after(make_api):
    api = make_api("SendTrackingEvent")
    for i in range(10):
        assert api.post("/events/batch", json=batch(event(f"r{i}"))).status_code == 200
    response = api.post("/events/batch", json=batch(event("r10")))
    error_of(response, 429)
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    assert response.headers["X-RateLimit-Remaining"] == "0"
    assert api.get("/events/status", params={"dedup_id": "r10"}).json()["status"] == "not_found"
    other_key = make_api("SendTrackingEvent")
    assert other_key.post("/events/batch", json=batch(event("r10"))).status_code == 200


def test_status_by_name_says_whether_the_configuration_pays_that_name(api):
    """An event whose name no conversion or campaign names is accepted and pays nothing: `paid` says so."""
    config = {"default_tier": None, "tiers": [], "conversions": [{"event_name": "purchase", "base": {"fixed": "1"},
              "end_user_reward": {"fixed": "1"}}], "campaigns": [{"id": "c", "event_names": ["signup"],
              "starts_at": "2020-01-01T00:00:00Z", "ends_at": "2299-01-01T00:00:00Z", "bonus": "5"}]}  # fmt: skip
    assert api.put("/projects/config", json=config).status_code == 200
    assert api.post("/events/batch", json=batch(event("p1", name="purchse"))).json() == {"ingested_events": 1}
    api.wait_processed("p1")
    user = {"user_identifier": event("p1")["user_identifier"], "user_identifier_type": "evm_address"}
    status = {name: api.get("/events/status", params={**user, "event_name": name}).json()
              for name in ("purchse", "purchase", "signup")}  # fmt: skip
    assert status == {"purchse": {"created": True, "paid": False}, "purchase": {"created": False, "paid": True},
                      "signup": {"created": False, "paid": True}}  # fmt: skip
    totals = api.get(f"/payouts/totals/{user['user_identifier']}", params={"identifier_type": "evm_address"})
    assert totals.json()["total_points"] == "0"
