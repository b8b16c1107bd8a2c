"""rewards/domain/webhook_events.py's deliveries: what an attempt makes of one (succeeded on a 2xx; due again on the
retry schedule; failed past 3 days from its window, or at once on a 410), a redelivery by hand, and how a lease shares
its batch between endpoints."""

from rewards.domain import webhook_events as events

DAY, HOUR = 86_400_000, 3_600_000
T0 = 1_800_000_000_000


def delivery(**fields) -> events.Delivery:
    made = events.new_delivery("p1", "wh_1", "reward.earned", "conversion:e-1:0", b'{"n":1}', T0)
    return events.Delivery(**{**events.delivery_to_json(made), "body": made.body, **fields})


def test_a_new_delivery_is_due_at_once_with_a_stable_id():
    made = delivery()
    assert (made.status, made.attempts, made.next_attempt_ms, made.window_ms) == (events.PENDING_DELIVERY, 0, T0, T0)
    assert made.id == events.webhook_id("wh_1", "reward.earned", "conversion:e-1:0")
    assert events.delivery_from_json(events.delivery_to_json(made)) == made


def test_a_2xx_succeeds():
    done = events.after_attempt(delivery(attempts=2, last_error="answered 500"), True, 204, None, T0 + 1000)
    assert (done.status, done.attempts, done.next_attempt_ms) == (events.SUCCEEDED, 3, None)
    assert (done.last_status_code, done.last_error) == (204, None)


def test_a_failure_is_due_again_on_the_schedule():
    once = events.after_attempt(delivery(), False, 500, None, T0)
    assert (once.status, once.attempts, once.next_attempt_ms) == (events.PENDING_DELIVERY, 1, T0 + 5_000)
    assert (once.last_status_code, once.last_error) == (500, "answered 500")
    twice = events.after_attempt(once, False, None, "timed out", T0 + 5_000)
    assert (twice.next_attempt_ms, twice.last_status_code, twice.last_error) == (T0 + 35_000, None, "timed out")
    sixth = events.after_attempt(delivery(attempts=5), False, 503, None, T0 + HOUR)
    assert sixth.next_attempt_ms == T0 + 7 * HOUR  # every 6 h after the fifth


def test_past_three_days_from_its_window_it_fails():
    late = delivery(attempts=9, window_ms=T0)
    last = events.after_attempt(late, False, 500, None, T0 + 3 * DAY - 6 * HOUR)
    assert last.status == events.PENDING_DELIVERY and last.next_attempt_ms == T0 + 3 * DAY
    failed = events.after_attempt(late, False, 500, None, T0 + 3 * DAY - 6 * HOUR + 1)
    assert (failed.status, failed.next_attempt_ms, failed.attempts) == (events.FAILED, None, 10)


def test_a_410_fails_at_once():
    gone = events.after_attempt(delivery(), False, 410, None, T0)
    assert (gone.status, gone.next_attempt_ms, gone.last_status_code) == (events.FAILED, None, 410)


def test_a_redelivery_is_due_now_with_three_days_again():
    failed = events.after_attempt(delivery(attempts=9), False, 500, None, T0 + 3 * DAY)
    now = T0 + 5 * DAY
    again = events.redelivered(failed, now)
    assert failed.status == events.FAILED
    assert (again.status, again.next_attempt_ms, again.window_ms) == (events.PENDING_DELIVERY, now, now)
    assert (again.id, again.attempts, again.created_ms, again.last_status_code) == (failed.id, 10, T0, 500)
    retried = events.after_attempt(again, False, 500, None, now)
    assert retried.status == events.PENDING_DELIVERY  # its 3 days count from the redelivery


def test_a_lease_shares_its_batch_between_endpoints():
    assert events.lease_shares({"a": 1000, "b": 1, "c": 1}, 10) == {"a": 8, "b": 1, "c": 1}
    assert events.lease_shares({"a": 10, "b": 10}, 5) == {"a": 3, "b": 2}  # the earliest due gets the remainder
    assert events.lease_shares({"a": 5, "b": 5, "c": 5}, 2) == {"a": 1, "b": 1, "c": 0}
    assert events.lease_shares({"a": 0, "b": 4}, 100) == {"a": 0, "b": 4}
    assert events.lease_shares({}, 10) == {} and events.lease_shares({"a": 3}, 0) == {"a": 0}
