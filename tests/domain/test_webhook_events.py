"""rewards/domain/webhook_events.py: API.md §10's reward.earned body exactly, stable webhook-ids, the retry schedule
(5 s, 30 s, 2 min, 10 min, 1 h, then every 6 h, for 3 days) and when an endpoint is disabled."""

from rewards.domain import webhook_events as events

DAY, HOUR = 86_400_000, 3_600_000
POINTS = {"currency": "point", "currency_name": "", "currency_chain_id": 0, "role": "user",
          "recipient_identifier": "0xb0b", "recipient_identifier_type": "evm_address", "amount": "12.500"}  # fmt: skip
USDC = {**POINTS, "currency": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "currency_name": "USDC",
        "currency_chain_id": "1", "role": "affiliate", "amount": "3000000"}  # fmt: skip


def test_reward_earned_is_the_hosted_services_body():
    assert events.reward_earned(POINTS, events.ACCEPTED, None, "purchase", "2026-11-26T12:00:00.000Z") == {
        "event_type": "reward.earned",
        "movement": {
            "type": "point", "reason": "end_user_payout", "status": "accepted", "status_details": None,
            "user_identifier": "0xb0b", "user_identifier_type": "evm_address", "amount": "12.5",
            "currency": {"name": "POINT", "address": None, "chain_id": None}, "conversion_name": "purchase",
            "created_at": "2026-11-26T12:00:00.000Z",
        },
    }  # fmt: skip
    refused = events.reward_earned(USDC, events.REJECTED, "cap_exceeded", "swap", "2026-11-26T12:00:00.000Z")
    movement = refused["movement"]
    assert (movement["type"], movement["reason"], movement["status"], movement["status_details"]) == (
        "onchain-currency", "affiliate_payout", "rejected", "cap_exceeded")  # fmt: skip
    assert movement["currency"] == {"name": "USDC", "address": USDC["currency"], "chain_id": 1}
    assert movement["amount"] == "3000000"


def test_a_webhook_id_is_the_same_whenever_its_event_is_met_again():
    first = events.webhook_id("wh_1", "reward.earned", "conversion:order-1:0")
    assert first == events.webhook_id("wh_1", "reward.earned", "conversion:order-1:0") and first.startswith("msg_")
    assert first != events.webhook_id("wh_2", "reward.earned", "conversion:order-1:0")
    assert first != events.webhook_id("wh_1", "reward.reversed", "conversion:order-1:0")


def test_retries_follow_the_schedule_for_three_days_then_stop():
    start, now, dues = 0, 0, []
    for attempts in range(1, 40):
        due = events.next_attempt_ms(attempts, start, now)
        if due is None:
            break
        dues.append(due - now)
        now = due
    assert dues[:6] == [5_000, 30_000, 120_000, 600_000, HOUR, 6 * HOUR]
    assert set(dues[5:]) == {6 * HOUR} and now <= 3 * DAY < now + 6 * HOUR


def test_an_endpoint_is_disabled_on_410_or_after_five_days_of_failures():
    assert events.disables(410, None, 0)
    assert not events.disables(500, 0, 5 * DAY - 1) and events.disables(500, 0, 5 * DAY)
    assert not events.disables(None, None, 10 * DAY)
