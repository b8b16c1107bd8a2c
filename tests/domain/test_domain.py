"""Pure domain rules: identifiers, amounts, timestamps, codes, the payout engine."""

from decimal import Decimal

import pytest

from rewards.domain import payouts as engine
from rewards.domain.amounts import format_amount
from rewards.domain.codes import generate_code, is_affiliate_code
from rewards.domain.identifiers import InvalidIdentifier, canonical_identifier
from rewards.domain.limits import LimitError
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.referrals import parse_rebate_rate
from rewards.domain.timestamps import format_timestamp, parse_timestamp_ms

VALID = [
    ("0xAbCdEf0123456789abcdef0123456789ABCDEF01", "evm_address", "0xabcdef0123456789abcdef0123456789abcdef01"),
    ("So11111111111111111111111111111111111111112", "solana_address", None),
    ("0x" + "A" * 64, "sui_address", "0x" + "a" * 64),
    ("rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh", "xrpl_address", None),
    ("GAAZI4TCR3TY5OJHCTJC2A4QSY6CJWJH5IAJTGKIN2ER7LBNVKOCCWN7", "stellar_address", None),
    ("Alice@Example.COM", "email", "alice@example.com"),
]
INVALID = [
    ("0x123", "evm_address"),
    ("0OOO", "solana_address"),
    ("0x" + "a" * 63, "sui_address"),
    ("xHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh", "xrpl_address"),
    ("GAAZI4TCR3TY5OJHCTJC2A4QSY6CJWJH5IAJTGKIN2ER7LBNVKOCCWN6", "stellar_address"),  # bad checksum
    ("not-an-email", "email"),
    ("0x" + "a" * 40, "bitcoin_address"),
]


@pytest.mark.parametrize(("identifier", "kind", "stored"), VALID)
def test_valid_identifiers_and_their_stored_form(identifier, kind, stored):
    assert canonical_identifier(identifier, kind) == (stored or identifier)


@pytest.mark.parametrize(("identifier", "kind"), INVALID)
def test_invalid_identifiers(identifier, kind):
    with pytest.raises(InvalidIdentifier):
        canonical_identifier(identifier, kind)


@pytest.mark.parametrize(
    ("value", "text"), [("0", "0"), ("1500", "1500"), ("12.50", "12.5"), ("1E+3", "1000"), ("0.000", "0")]
)
def test_amount_wire_format(value, text):
    assert format_amount(Decimal(value)) == text


def test_timestamps_round_trip_with_milliseconds():
    ms = parse_timestamp_ms("2026-11-22T09:12:03.123Z")
    assert ms == parse_timestamp_ms(ms) == parse_timestamp_ms(str(ms))
    assert format_timestamp(ms) == "2026-11-22T09:12:03.123Z"


def test_codes_are_7_characters_of_the_alphabet():
    codes = {generate_code() for _ in range(1000)}
    assert len(codes) == 1000 and all(len(c) == 7 and c.isalnum() and c.upper() == c for c in codes)


CONFIG = PayoutConfig.model_validate(
    {
        "default_tier": "base",
        "tiers": [
            {"id": "base", "name": "B", "rank": 1, "rates": {"r1": "0.1", "r2": "0.05", "r3": "0.02", "r4": 0.01}}
        ],
        "conversions": [
            {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"},
             "currency": {"address": "0xa0b8", "chain_id": 1, "name": "USDC", "decimals": 6}},
            {"event_name": "tiny", "base": {"fixed": "0.000000000000000001"}, "end_user_reward": {"rate": "0.5"}},
        ],
    }
)  # fmt: skip
USER = engine.User("u", "email")
CHAIN = [engine.User(f"l{n}", "email") for n in range(1, 7)]


def test_commissions_stop_at_level_4_and_tokens_are_raw_integers_rounded_down():
    event = engine.Conversion("swap", USER, 0, {"revenue": {"amount": "100.0000001"}})
    paid = engine.conversion_payouts(event, CONFIG, CHAIN, None)
    # base = 30.00000003 USDC; L1 = 3.000000003 USDC -> 3000000 raw (rounded down)
    assert [(p.level, p.amount) for p in paid] == [(1, 3000000), (2, 1500000), (3, 600000), (4, 300000)]
    assert {p.recipient.identifier for p in paid} == {"l1", "l2", "l3", "l4"}


def test_payouts_rounding_to_zero_are_not_written_and_missing_args_pay_nothing():
    assert engine.conversion_payouts(engine.Conversion("tiny", USER, 0, {}), CONFIG, [], None) == []
    assert engine.conversion_payouts(engine.Conversion("swap", USER, 0, {}), CONFIG, CHAIN, None) == []
    assert engine.code_use_payouts(CONFIG, CHAIN[0], USER) == []  # no referral_reward configured


# -- rebates (API.md §7): the referred user's share of the level-1 commission through a code ---------------------


def _commission(amount: str, currency="point", level: int = 1) -> engine.Payout:
    return engine.Payout("affiliate_commission", "affiliate", level, CHAIN[level - 1], Decimal(amount), currency)


@pytest.mark.parametrize(
    ("commission", "rate", "kept", "rebate"),
    [
        ("20", "0.25", "15", "5"),
        ("3", "0.1", "2.7", "0.3"),
        # the share is rounded down to the 18 places points carry; the affiliate keeps the rest, exactly
        ("0.000000000000000003", "0.5", "0.000000000000000002", "0.000000000000000001"),
        ("1", "0.333333333333333333333", "0.666666666666666667", "0.333333333333333333"),
        ("7", "1", None, "7"),  # all of it to the user: the affiliate's part, zero, is not written
        ("0.000000000000000001", "0.5", "0.000000000000000001", None),  # a share rounding to zero is not written
    ],
)
def test_a_rebate_splits_the_level_1_commission_exactly(commission, rate, kept, rebate):
    level2 = _commission("4", level=2)
    paid = engine.with_rebate([_commission(commission), level2], Decimal(rate), USER)
    expected = []
    if kept is not None:
        expected.append(("affiliate_commission", "affiliate", 1, CHAIN[0], Decimal(kept)))
    if rebate is not None:
        expected.append(("rebate", "user", 0, USER, Decimal(rebate)))
    assert [(p.kind, p.role, p.level, p.recipient, p.amount) for p in paid[:-1]] == expected
    assert paid[-1] == level2  # only the level-1 commission is split
    assert sum((p.amount for p in paid[:-1]), Decimal(0)) == Decimal(commission)  # the two sum to it exactly


def test_a_rebate_of_a_token_commission_is_raw_units_rounded_down():
    usdc = CONFIG.conversions[0].currency
    paid = engine.with_rebate([_commission("3000001", usdc)], Decimal("0.3"), USER)
    assert [(p.kind, p.amount, p.currency) for p in paid] == [
        ("affiliate_commission", Decimal("2100001"), usdc), ("rebate", Decimal("900000"), usdc)]  # fmt: skip


def test_the_engine_applies_the_rebate_of_the_code_through_which_the_user_was_referred():
    event = engine.Conversion("swap", USER, 0, {"revenue": {"amount": "100"}})  # base 30 USDC; L1 3 USDC
    plain = engine.conversion_payouts(event, CONFIG, CHAIN, None)
    rebated = engine.conversion_payouts(event, CONFIG, CHAIN, None, Decimal("0.2"))
    assert [(p.kind, p.level, p.recipient.identifier, p.amount) for p in rebated] == [
        ("affiliate_commission", 1, "l1", 2400000), ("rebate", 0, "u", 600000),
        ("affiliate_commission", 2, "l2", 1500000), ("affiliate_commission", 3, "l3", 600000),
        ("affiliate_commission", 4, "l4", 300000)]  # fmt: skip
    assert rebated[0].amount + rebated[1].amount == plain[0].amount
    assert engine.conversion_payouts(event, CONFIG, CHAIN, None, Decimal(0)) == plain  # a rate of 0: no rebate
    assert engine.conversion_payouts(event, CONFIG, [], None, Decimal("0.5")) == []  # no referrer: no commission


def test_affiliate_codes_and_rebate_rates():
    assert all(is_affiliate_code(c) for c in ("abc", "A_b-9", "x" * 32, "ABC1234"))
    assert not any(is_affiliate_code(c) for c in ("ab", "x" * 33, "a b", "ab$", "abc\n", "ſab", "äbc", ""))
    assert parse_rebate_rate(0.15) == Decimal("0.15") and parse_rebate_rate("1") == 1 and parse_rebate_rate(0) == 0
    for wrong in ("1.01", -0.1, "0.1e1", True, None, "x", "0." + "1" * 19):
        with pytest.raises(LimitError, match="from 0 to 1"):
            parse_rebate_rate(wrong)
