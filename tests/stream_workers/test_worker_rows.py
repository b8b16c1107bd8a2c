"""The workers' fast paths give what the plain ones give: the payout engine's rules looked up once per delivery, rows
built without models, a record that fails leaving nothing behind."""

from decimal import Decimal
from typing import get_args

import pytest

from rewards.domain import payouts as engine
from rewards.domain.amounts import multiply
from rewards.domain.claim_checks import ClaimCheck, to_record
from rewards.domain.payout_config import PayoutConfig, TokenCurrency
from rewards.domain.payouts import User
from schemas.records import AnyRecord, ConversionRecord, Undecodable
from stream_workers import processor, rows
from stream_workers.handlers import HANDLERS
from stream_workers.handlers.base import Project
from stream_workers.handlers.stored import claim_check_record_row

USDC = {"address": "0xa0b8", "chain_id": 1, "name": "USDC", "decimals": 6}
CONFIG = PayoutConfig.model_validate(
    {
        "default_tier": "base",
        "tiers": [
            {"id": "base", "name": "B", "rank": 1, "rates": {"r1": "0.1", "r2": "0.05", "r3": "0.02", "r4": "0.01"}},
            {"id": "gold", "name": "G", "rank": 2, "rates": {"r1": "0.2", "r2": "0.1", "r3": "0.05", "r4": "0.02"}},
        ],
        "conversions": [
            {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "end_user_reward": {"rate": "0.1"}},
            {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"}, "currency": USDC},
            {"event_name": "signup", "base": {"fixed": "100"}, "end_user_reward": {"fixed": "5"}},
            {"event_name": "tiny", "base": {"fixed": "0.000000000000000001"}, "end_user_reward": {"rate": "0.5"}},
        ],
        "campaigns": [{"id": "c", "event_names": ["purchase", "other"], "starts_at": "2026-01-01T00:00:00Z",
                       "ends_at": "2027-01-01T00:00:00Z", "bonus": "1.5"}],
    }
)  # fmt: skip
USER = User("0xuser", "evm_address")
CHAINS = [[], [User(f"l{n}", "email") for n in range(1, 3)], [User(f"l{n}", "email") for n in range(1, 7)]]
IN_CAMPAIGN, BEFORE = 1_790_000_000_000, 1_700_000_000_000


def _old_payouts(event, config, chain, l1_tier):
    """The engine as it was before rules were looked up once (its reference)."""
    rule = config.conversion_for(event.name)
    paid = []
    base = None if rule is None else engine._base_amount(rule.base, event.args)
    if rule is not None and base is not None:
        reward = rule.end_user_reward
        if reward is not None:
            amount = reward.fixed if reward.fixed is not None else multiply(reward.rate, base)
            paid.append(engine.Payout("end_user_reward", "user", 0, event.user, amount, rule.currency))
        tier = config.effective_tier(l1_tier) if chain else None
        if tier is not None:
            for level, affiliate in enumerate(chain[:4], start=1):
                amount = multiply(base, tier.rates.at_level(level))
                paid.append(engine.Payout("affiliate_commission", "affiliate", level, affiliate, amount, rule.currency))
    paid += [
        engine.Payout("campaign_bonus", "user", 0, event.user, c.bonus, "point")
        for c in config.campaigns
        if event.name in c.event_names and c.starts_at <= event.timestamp_ms < c.ends_at
    ]
    return engine._rounded(paid)


@pytest.mark.parametrize("name", ["purchase", "swap", "signup", "tiny", "other", "unknown"])
@pytest.mark.parametrize("chain", CHAINS, ids=["unreferred", "2 levels", "6 levels"])
@pytest.mark.parametrize("tier", [None, "gold", "gone"])
@pytest.mark.parametrize("at", [IN_CAMPAIGN, BEFORE])
@pytest.mark.parametrize("amount", ["1234.567890123456789", "0.000000000000000001", "999999999999999999999999999"])
def test_rules_pay_what_the_configuration_says(name, chain, tier, at, amount):
    args = {"value": {"amount": amount}, "revenue": {"amount": amount}}
    event = engine.Conversion(name, USER, at, args)
    rules = engine.Rules(CONFIG)
    payouts, volumes = rules.effects(event, chain, tier)
    assert payouts == engine.conversion_payouts(event, CONFIG, chain, tier) == _old_payouts(event, CONFIG, chain, tier)
    assert volumes == engine.conversion_volumes(event, CONFIG, chain)
    assert rules.pays(name) == (CONFIG.conversion_for(name) is not None or bool(CONFIG.campaigns))


def test_rules_raise_what_the_engine_raises():
    event = engine.Conversion("purchase", USER, IN_CAMPAIGN, {"value": {"amount": "1" + "0" * 29}})
    huge = PayoutConfig.model_validate({**CONFIG.model_dump(mode="json"), "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1" + "0" * 25}}]})  # fmt: skip
    with pytest.raises(engine.PayoutTooLarge):
        engine.Rules(huge).effects(event, CHAINS[1], None)
    bad = engine.Conversion("purchase", USER, IN_CAMPAIGN, {"value": {"amount": "1e5"}})
    with pytest.raises(ValueError, match="plain non-negative decimal"):
        engine.Rules(CONFIG).effects(bad, [], None)


def test_payout_rows_are_the_plain_rows():
    source = rows.PayoutSource("p", "d-1", "conversion", IN_CAMPAIGN + 5, "ALICE")  # through the code ALICE
    token = TokenCurrency(**USDC)
    paid = [
        engine.Payout("end_user_reward", "user", 0, USER, Decimal("12.500000000000000000"), "point"),
        engine.Payout("affiliate_commission", "affiliate", 1, User("l1", "email"), Decimal(3000000), token),
    ]
    created = IN_CAMPAIGN + 999
    expected = [
        {"project_id": "p", "payout_id": "conversion:d-1:0", "source_id": "d-1", "source_type": "conversion",
         "kind": "end_user_reward", "role": "user", "level": 0, "recipient_identifier": "0xuser",
         "recipient_identifier_type": "evm_address", "amount": "12.5", "currency": "point", "currency_chain_id": 0,
         "currency_name": "", "currency_decimals": 0, "happened_at": "2026-09-21 14:13:20.005",
         "created_at": "2026-09-21 14:13:20.999", "code": "ALICE"},
        {"project_id": "p", "payout_id": "conversion:d-1:1", "source_id": "d-1", "source_type": "conversion",
         "kind": "affiliate_commission", "role": "affiliate", "level": 1, "recipient_identifier": "l1",
         "recipient_identifier_type": "email", "amount": "3000000", "currency": "0xa0b8", "currency_chain_id": 1,
         "currency_name": "USDC", "currency_decimals": 6, "happened_at": "2026-09-21 14:13:20.005",
         "created_at": "2026-09-21 14:13:20.999", "code": "ALICE"},
    ]  # fmt: skip
    assert rows.payout_rows(source, list(enumerate(paid)), created) == expected
    assert rows.payout_rows(source, [], created) == []


@pytest.mark.parametrize("claimed_ms", [None, IN_CAMPAIGN + 7])
def test_claim_check_rows_are_the_records_rows(claimed_ms):
    check = ClaimCheck("cc_1", User("a\\N\t'b", "email"), TokenCurrency(**USDC), 3000000, "affiliate_payout",
                       "claimed" if claimed_ms else "open", "0xab" if claimed_ms else None, "d-1", IN_CAMPAIGN,
                       claimed_ms, 3)  # fmt: skip
    assert rows.claim_check_row("p", check) == claim_check_record_row(to_record("p", check))


def test_a_record_that_fails_leaves_no_row_behind():
    """Its conversion row is computed before its payouts raise: only its dead letter is written."""
    project = Project(engine.Rules(CONFIG), {USER: CHAINS[1]}, {})
    good, bad = (
        ConversionRecord(project_id="p", batch_id="b", dedup_id=d, name="purchase", user_identifier=USER.identifier,
                         user_identifier_type=USER.identifier_type, timestamp_ms=IN_CAMPAIGN, received_ms=IN_CAMPAIGN,
                         args={"value": {"amount": amount}})
        for d, amount in (("good", "10"), ("bad", "1e5"))
    )  # fmt: skip
    writes = processor.compute([good, bad], {"p": project}, IN_CAMPAIGN, "t")
    assert [r["dedup_id"] for r in writes.rows["conversions"]] == ["good"]
    assert {r["source_id"] for r in writes.rows["payouts"]} == {"good"}
    assert [r["source_id"] for r in writes.rows["affiliate_volumes"]] == ["good", "good"]
    assert [r["source_id"] for r in writes.rows["dead_letters"]] == ["bad"]
    assert [(r["dedup_id"], r["failed"]) for r in writes.rows["dedup_ids"]] == [("good", 0), ("bad", 1)]
    assert writes.processed == {"p": ["good"]} and writes.failed == {"p": ["bad"]}
    assert writes.payouts == len(writes.rows["payouts"]) == 4  # reward, 2 commissions, campaign bonus


def test_every_record_type_has_its_handler():
    assert set(HANDLERS) == {*get_args(AnyRecord), Undecodable}
    assert all(record_type is handler.record_type for record_type, handler in HANDLERS.items())
