"""The payout engine (API.md §6): pure arithmetic from an event, a configuration and a referral chain."""

from dataclasses import dataclass, replace
from decimal import ROUND_DOWN, Decimal
from enum import StrEnum

from rewards.domain.amounts import EXACT, multiply, to_points, to_raw_token_units
from rewards.domain.limits import PAYOUT_LIMIT, parse_amount
from rewards.domain.payout_config import PayoutConfig, TokenCurrency

MAX_LEVELS = 4
POINT = "point"
ZERO = Decimal(0)


class PayoutKind(StrEnum):
    """Every kind of payout, as the warehouse stores it (payouts.kind) and the answers name it. The views' SQL names
    them too: tests/schemas/test_payout_kinds.py holds every kind a view names to this enum."""

    COMMISSION = "affiliate_commission"
    REFERRAL_REWARD = "referral_reward"
    END_USER_REWARD = "end_user_reward"
    CAMPAIGN_BONUS = "campaign_bonus"
    # The referred user's share of a level-1 commission paid through a code with a rebate rate (API.md §7): earned as
    # a user (role "user": leaderboard/users, the end-user side of the totals), level 0 like every payout but
    # commissions.
    REBATE = "rebate"


COMMISSION, REBATE = PayoutKind.COMMISSION, PayoutKind.REBATE


@dataclass(frozen=True, slots=True)
class User:
    identifier: str
    identifier_type: str


@dataclass(frozen=True, slots=True)
class Payout:
    kind: PayoutKind
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
    rebate_rate: Decimal | None = None,
) -> list[Payout]:
    """Every payout one conversion event earns. `referrer_chain[0]` referred the event's user, through a code whose
    rebate rate is `rebate_rate` (None: none)."""
    rules = Rules(config)
    return rules.payouts(event, rules.base(event), referrer_chain, l1_tier_id, rebate_rate)


@dataclass(frozen=True)
class Volume:
    level: int  # where the affiliate stood in the converting user's referrer chain (1 = referred them)
    affiliate: User
    base: Decimal  # the conversion's base amount, in the unit of its conversion rule
    # The base as the affiliate's volumes count it (API.md §4, in points): `base` when the rule pays points, 0 when it
    # pays a token (that base is in the token: a volume that added it would add two currencies).
    counted_base: Decimal


def conversion_volumes(event: Conversion, config: PayoutConfig, referrer_chain: list[User]) -> list[Volume]:
    """The base amount of a conversion, counted once for each affiliate of the chain (API.md §4)."""
    rules = Rules(config)
    return rules.volumes(event, rules.base(event), referrer_chain)


def code_use_payouts(config: PayoutConfig, owner: User, referred: User) -> list[Payout]:
    reward = config.referral_reward
    if reward is None:
        return []
    return _rounded(
        [
            Payout(PayoutKind.REFERRAL_REWARD, "affiliate", 0, owner, reward.referrer, POINT),
            Payout(PayoutKind.REFERRAL_REWARD, "user", 0, referred, reward.referred, POINT),
        ]
    )


class Rules:
    """A configuration's rules as the engine applies them, looked up once (per delivery in the workers) rather than
    once per event: each event name's conversion rule, the tiers by id, the campaigns. The arithmetic per event is
    then a few exact multiplications and roundings."""

    def __init__(self, config: PayoutConfig):
        self.config = config
        self._rules = {rule.event_name: rule for rule in reversed(config.conversions)}  # the first of a name wins
        self._tiers = {tier.id: tier for tier in reversed(config.tiers)}
        self._default_tier = self._tiers.get(config.default_tier)
        self.campaigns = config.campaigns

    def pays(self, name: str) -> bool:
        """Whether an event of this name can earn anything (a conversion rule, or any campaign)."""
        return name in self._rules or bool(self.campaigns)

    def names(self, name: str) -> bool:
        """Whether the configuration names events of this name: a conversion rule, or a campaign that lists it."""
        return name in self._rules or any(name in campaign.event_names for campaign in self.campaigns)

    def base(self, event: Conversion) -> Decimal | None:
        """The event's base amount under its rule; None without a rule or without the argument it is a rate of."""
        rule = self._rules.get(event.name)
        return None if rule is None else _base_amount(rule.base, event.args)

    def effects(
        self, event: Conversion, referrer_chain: list[User], l1_tier_id: str | None, rebate_rate: Decimal | None = None
    ) -> tuple[list[Payout], list[Volume]]:
        """conversion_payouts and conversion_volumes at once, the base amount computed once."""
        base = self.base(event)
        payouts = self.payouts(event, base, referrer_chain, l1_tier_id, rebate_rate)
        return payouts, self.volumes(event, base, referrer_chain)

    def payouts(
        self,
        event: Conversion,
        base: Decimal | None,
        referrer_chain: list[User],
        l1_tier_id: str | None,
        rebate_rate: Decimal | None = None,
    ) -> list[Payout]:
        rule = self._rules.get(event.name)
        payouts: list[Payout] = []
        if rule is not None and base is not None:
            reward = rule.end_user_reward
            if reward is not None:
                amount = reward.fixed if reward.fixed is not None else multiply(reward.rate, base)
                _add_rounded(payouts, PayoutKind.END_USER_REWARD, "user", 0, event.user, amount, rule.currency)
            tier = self._tier(l1_tier_id) if referrer_chain else None
            if tier is not None:
                r = tier.rates
                rates = (r.r1, r.r2, r.r3, r.r4)
                for level, affiliate in enumerate(referrer_chain[:MAX_LEVELS], start=1):
                    amount = multiply(base, rates[level - 1])
                    _add_rounded(payouts, COMMISSION, "affiliate", level, affiliate, amount, rule.currency)
                if rebate_rate:
                    payouts = with_rebate(payouts, rebate_rate, event.user)
        for campaign in self.campaigns:
            if event.name in campaign.event_names and campaign.starts_at <= event.timestamp_ms < campaign.ends_at:
                _add_rounded(payouts, PayoutKind.CAMPAIGN_BONUS, "user", 0, event.user, campaign.bonus, POINT)
        return payouts

    def volumes(self, event: Conversion, base: Decimal | None, referrer_chain: list[User]) -> list[Volume]:
        """A volume for each affiliate of the chain when the conversion has a positive base (the portal counts its
        conversions from them too)."""
        if base is None or base <= 0:
            return []
        if base >= PAYOUT_LIMIT:
            raise PayoutTooLarge(f"a base amount of {base} is not below the payout limit 10^48")
        counted = base if self._rules[event.name].currency == POINT else ZERO
        chain = referrer_chain[:MAX_LEVELS]
        return [Volume(level, affiliate, base, counted) for level, affiliate in enumerate(chain, start=1)]

    def _tier(self, own_tier: str | None):
        """PayoutConfig.effective_tier: the referrer's own tier, else the default one."""
        return self._tiers.get(own_tier) or self._default_tier


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


def with_rebate(payouts: list[Payout], rebate_rate: Decimal, referred: User) -> list[Payout]:
    """`payouts` with each level-1 commission split (API.md §7): `rebate_rate` of it, rounded down to what its
    currency carries (18 places of points, raw token units), becomes a `rebate` to the referred user, right after the
    commission, which keeps the rest. The two sum to the commission exactly; a part that is zero is not written."""
    split: list[Payout] = []
    for payout in payouts:
        if payout.kind != COMMISSION or payout.level != 1:
            split.append(payout)
            continue
        share = _round_down(multiply(payout.amount, rebate_rate), payout.currency)
        kept = EXACT.subtract(payout.amount, share)
        if kept > 0:
            split.append(replace(payout, amount=kept))
        if share > 0:
            split.append(Payout(REBATE, "user", 0, referred, share, payout.currency))
    return split


def _round_down(amount: Decimal, currency) -> Decimal:
    """An amount in a payout's own unit (points, or raw token units) rounded down to what that unit carries."""
    if isinstance(currency, TokenCurrency):
        return amount.to_integral_value(rounding=ROUND_DOWN, context=EXACT)
    return to_points(amount)


class PayoutTooLarge(ValueError):
    """A payout the warehouse cannot sum safely (rewards.domain.limits.PAYOUT_LIMIT)."""


def _rounded(payouts: list[Payout]) -> list[Payout]:
    """Points keep 18 places, tokens become raw integers; a payout rounding to zero is not written."""
    result: list[Payout] = []
    for p in payouts:
        _add_rounded(result, p.kind, p.role, p.level, p.recipient, p.amount, p.currency)
    return result


def _add_rounded(
    payouts: list[Payout], kind: str, role: str, level: int, recipient: User, amount: Decimal, currency
) -> None:
    """Append the payout with its amount rounded (see _rounded), unless that is zero."""
    token = isinstance(currency, TokenCurrency)
    amount = to_raw_token_units(amount, currency.decimals) if token else to_points(amount)
    if amount >= PAYOUT_LIMIT:
        raise PayoutTooLarge(f"a {kind} of {amount} is not below the payout limit 10^48")
    if amount > 0:
        payouts.append(Payout(kind, role, level, recipient, amount, currency))
