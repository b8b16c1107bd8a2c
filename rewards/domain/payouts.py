"""The payout engine (API.md §6): pure arithmetic from an event, a configuration and a referral chain."""

from dataclasses import dataclass
from decimal import Decimal

from rewards.domain.amounts import multiply, to_points, to_raw_token_units
from rewards.domain.limits import PAYOUT_LIMIT, parse_amount
from rewards.domain.payout_config import PayoutConfig, TokenCurrency

MAX_LEVELS = 4
POINT = "point"


@dataclass(frozen=True)
class User:
    identifier: str
    identifier_type: str


@dataclass(frozen=True)
class Payout:
    kind: str  # affiliate_commission | referral_reward | end_user_reward | campaign_bonus
    role: str  # "affiliate" (earned as an affiliate) or "user" (earned as an end user)
    level: int  # 1-4 for commissions, 0 otherwise
    recipient: User
    amount: Decimal  # points, or the raw integer of a token's smallest unit
    currency: str | TokenCurrency


@dataclass(frozen=True)
class Conversion:
    name: str
    user: User
    timestamp_ms: int
    args: dict


def conversion_payouts(
    event: Conversion,
    config: PayoutConfig,
    referrer_chain: list[User],
    l1_tier_id: str | None,
) -> list[Payout]:
    """Every payout one conversion event earns. `referrer_chain[0]` referred the event's user."""
    rule = config.conversion_for(event.name)
    payouts: list[Payout] = []
    if rule is not None:
        base = _base_amount(rule.base, event.args)
        if base is not None:
            payouts += _rule_payouts(rule, base, event.user, config, referrer_chain, l1_tier_id)
    payouts += [
        Payout("campaign_bonus", "user", 0, event.user, campaign.bonus, POINT)
        for campaign in config.campaigns
        if event.name in campaign.event_names and campaign.starts_at <= event.timestamp_ms < campaign.ends_at
    ]
    return _rounded(payouts)


@dataclass(frozen=True)
class Volume:
    level: int  # where the affiliate stood in the converting user's referrer chain (1 = referred them)
    affiliate: User
    base: Decimal  # the conversion's base amount, in the unit of its conversion rule


def conversion_volumes(event: Conversion, config: PayoutConfig, referrer_chain: list[User]) -> list[Volume]:
    """The base amount of a conversion, counted once for each affiliate of the chain (API.md §4)."""
    rule = config.conversion_for(event.name)
    base = None if rule is None else _base_amount(rule.base, event.args)
    if base is None or base <= 0:
        return []
    if base >= PAYOUT_LIMIT:
        raise PayoutTooLarge(f"a base amount of {base} is not below the payout limit 10^48")
    return [Volume(level, affiliate, base) for level, affiliate in enumerate(referrer_chain[:MAX_LEVELS], start=1)]


def code_use_payouts(config: PayoutConfig, owner: User, referred: User) -> list[Payout]:
    reward = config.referral_reward
    if reward is None:
        return []
    return _rounded(
        [
            Payout("referral_reward", "affiliate", 0, owner, reward.referrer, POINT),
            Payout("referral_reward", "user", 0, referred, reward.referred, POINT),
        ]
    )


def _rule_payouts(rule, base, user, config, referrer_chain, l1_tier_id) -> list[Payout]:
    payouts = []
    reward = rule.end_user_reward
    if reward is not None:
        amount = reward.fixed if reward.fixed is not None else multiply(reward.rate, base)
        payouts.append(Payout("end_user_reward", "user", 0, user, amount, rule.currency))
    tier = config.effective_tier(l1_tier_id) if referrer_chain else None
    if tier is not None:
        for level, affiliate in enumerate(referrer_chain[:MAX_LEVELS], start=1):
            amount = multiply(base, tier.rates.at_level(level))
            payouts.append(Payout("affiliate_commission", "affiliate", level, affiliate, amount, rule.currency))
    return payouts


def _base_amount(base, args: dict) -> Decimal | None:
    if base.fixed is not None:
        return base.fixed
    arg = args.get(base.rate_of) if isinstance(args, dict) else None
    amount = arg.get("amount") if isinstance(arg, dict) else None
    if amount is None:
        return None
    # The edge accepted only amounts within the limits: one that is not (a record from before the limits)
    # raises LimitError, and the worker sets the record aside rather than guess.
    return multiply(base.rate, parse_amount(amount))


class PayoutTooLarge(ValueError):
    """A payout the warehouse cannot sum safely (rewards.domain.limits.PAYOUT_LIMIT)."""


def _rounded(payouts: list[Payout]) -> list[Payout]:
    """Points keep 18 places, tokens become raw integers; a payout rounding to zero is not written."""
    result = []
    for payout in payouts:
        if isinstance(payout.currency, TokenCurrency):
            amount = to_raw_token_units(payout.amount, payout.currency.decimals)
        else:
            amount = to_points(payout.amount)
        if amount >= PAYOUT_LIMIT:
            raise PayoutTooLarge(f"a {payout.kind} of {amount} is not below the payout limit 10^48")
        if amount > 0:
            result.append(Payout(payout.kind, payout.role, payout.level, payout.recipient, amount, payout.currency))
    return result
