"""The project's payout configuration (API.md §6) in the published client's shapes (API.md §7): the terms per tier
(`getIncentivesByTier`) and the conversions (`getConversions`). Pure renderings of the configuration the state store
holds (query_api.incentives.service reads it).

A conversion is a conversion rule of the configuration: its id, name and slug are its `event_name` (unique in a
configuration); `external_id` a number derived from that name, the same for the same name in any project and
configuration. A term is what one payee earns per conversion: for a rule whose base is `fixed`, an amount
(`unit: "fixed"`, in whole tokens for a token); for a base that is a rate of the event's `value` or `revenue`, the
percentage of that amount (`unit: "%"`); `currency` is `point` or the token's name. A payee the configuration pays
nothing is `{"amount": null, "currency": null, "unit": "none"}`.
"""

from decimal import Decimal
from typing import Literal

from pydantic import ConfigDict, Field, create_model

from rewards.domain.amounts import format_amount, multiply
from rewards.domain.payout_config import Conversion, PayoutConfig, Tier, TokenCurrency, external_id
from rewards.domain.referrals import json_number
from rewards.web.answers import USDC, Answer, decimal_text, exact_number, text

HUNDRED = Decimal(100)
NO_TERM = {"amount": None, "currency": None, "unit": "none"}
LEVELS = ("affiliate_rate", "affiliate2_rate", "affiliate3_rate", "affiliate4_rate")


def _currency_label(rule: Conversion) -> str:
    return rule.currency.name if isinstance(rule.currency, TokenCurrency) else rule.currency


def _variable(rule: Conversion) -> bool:
    return rule.base.fixed is None


def _share(rule: Conversion, share: Decimal) -> Decimal:
    """What a payee given `share` of the base earns: an amount (fixed base), or a percentage of the event's amount."""
    if _variable(rule):
        return multiply(multiply(rule.base.rate, share), HUNDRED)
    return multiply(rule.base.fixed, share)


def _term(rule: Conversion, share: Decimal | None) -> dict:
    if share is None:
        return NO_TERM
    unit = "%" if _variable(rule) else "fixed"
    return {"amount": format_amount(_share(rule, share)), "currency": _currency_label(rule), "unit": unit}


def _end_user_term(rule: Conversion) -> dict:
    reward = rule.end_user_reward
    if reward is None:
        return NO_TERM
    if reward.fixed is not None:  # a fixed reward is an amount whatever the base
        return {"amount": format_amount(reward.fixed), "currency": _currency_label(rule), "unit": "fixed"}
    return _term(rule, reward.rate)


def _rates(tier: Tier | None) -> tuple[Decimal, ...] | None:
    if tier is None:
        return None
    rates = tier.rates
    return rates.r1, rates.r2, rates.r3, rates.r4


def _payee_type(rule: Conversion, pays_affiliates: bool) -> str:
    end_user = rule.end_user_reward is not None
    return "both" if pays_affiliates and end_user else "end-user" if end_user else "affiliate"


def payout_term_by_tier(rule: Conversion, tier: Tier | None) -> dict:
    """The client's `PayoutTermByTier`: the rule's terms for the affiliates of `tier` (None: no tier applies)."""
    rates = _rates(tier)
    shares = rates or (None,) * len(LEVELS)
    levels = {name: _term(rule, share) for name, share in zip(LEVELS, shares, strict=True)}
    return {
        "conversion_name": rule.event_name,
        "payout_type": "variable" if _variable(rule) else "fixed",
        "payee_type": _payee_type(rule, rates is not None and any(rates)),
        "is_multi_level": rates is not None and any(rates[1:]),
        **levels,
        "end_user_rate": _end_user_term(rule),
    }


def _tier_terms(config: PayoutConfig, tier: Tier | None, bucket: Tier | None) -> dict:
    """The client's `TierPayoutTerms` of `tier`, or of the default bucket (`tier` None: the affiliates without a tier
    of their own, paid at the rates of `bucket`, the configuration's default tier, if any)."""
    return {
        "tier_id": None if tier is None else tier.id,
        "tier_name": None if tier is None else tier.name,
        "tier_description": None,
        "tier_slug": None if tier is None else tier.id,
        "tier_rank": None if tier is None else tier.rank,
        "payout_terms": [payout_term_by_tier(rule, tier or bucket) for rule in config.conversions],
    }


DEFAULT_BUCKET = "null"  # how the client names the default bucket among `tier_ids`


class UnknownTiers(ValueError):
    pass


def terms_by_tier(config: PayoutConfig, tier_ids: list[str] | None) -> dict:
    """The client's `GetIncentivesByTierResponse`: the default bucket then every tier by rank, or those of `tier_ids`
    (a tier id, or `null` for the default bucket), in that order; an id the configuration lacks raises UnknownTiers."""
    default = config.tier(config.default_tier)
    ranked = sorted(config.tiers, key=lambda tier: (tier.rank, tier.id))
    if tier_ids is None:
        wanted: list[Tier | None] = [None, *ranked]
    else:
        unknown = [i for i in tier_ids if i != DEFAULT_BUCKET and config.tier(i) is None]
        if unknown:
            raise UnknownTiers(f"tier_ids names no tier of the configuration: {', '.join(unknown)}")
        wanted = [None if i == DEFAULT_BUCKET else config.tier(i) for i in dict.fromkeys(tier_ids)]
    return {"tiers": [_tier_terms(config, tier, default) for tier in wanted]}


# -- GET /conversions -------------------------------------------------------------------------------------------


def _amounts(rule: Conversion, prefix: str, share: Decimal | None) -> dict:
    """A payout group's `<prefix>_amount` (fixed base) or `<prefix>_amount_percentage` (variable)."""
    if share is None:
        return {}
    if _variable(rule):
        return {f"{prefix}_amount_percentage": json_number(_share(rule, share))}
    return {f"{prefix}_amount": format_amount(_share(rule, share))}


def _end_user_amounts(rule: Conversion) -> dict:
    reward = rule.end_user_reward
    if reward is None:
        return {}
    if reward.fixed is not None:
        return {"end_user_amount": format_amount(reward.fixed)}
    return _amounts(rule, "end_user", reward.rate)


def _payout_group(rule: Conversion, tier: Tier) -> dict:
    prefixes = ("affiliate", "affiliate2", "affiliate3", "affiliate4")
    amounts = [_amounts(rule, prefix, rate) for prefix, rate in zip(prefixes, _rates(tier), strict=True)]
    return {
        "id": tier.id,
        "name": tier.name,
        **{key: value for level in amounts for key, value in level.items()},
        **_end_user_amounts(rule),
        "project_tier": {"id": tier.id, "name": tier.name, "slug": tier.id, "rank": tier.rank, "description": None},
    }


def _payout_term(rule: Conversion, config: PayoutConfig) -> dict:
    """The client's `PayoutTermResponse` of a rule: one payout group per tier."""
    token = rule.currency if isinstance(rule.currency, TokenCurrency) else None
    source = {"value": "volume", "revenue": "revenue"}.get(rule.base.rate_of) if _variable(rule) else None
    return {
        "id": rule.event_name,
        "scheme": "pay-per-attribution",
        "tier_type": "audience",
        "conversion_id": rule.event_name,
        "type": "onchain-currency" if token else "point",
        "calculation_strategy": "variable" if _variable(rule) else "fixed",
        "trigger_amount_source": source,
        "base_currency": "none",
        "payout_currency_address": token.address if token else None,
        "payout_currency_chain_id": token.chain_id if token else None,
        "require_affiliate": False,
        "require_approval": False,
        "amount_source": source or "attribution-count",
        "payee_type": _payee_type(rule, any(any(_rates(tier)) for tier in config.tiers)),
        "payout_groups": [_payout_group(rule, tier) for tier in sorted(config.tiers, key=lambda t: (t.rank, t.id))],
    }


def _trigger(event_name: str) -> dict:
    """The client's `Trigger` of a conversion: the event of that name, sent to the API (off-chain)."""
    text = dict.fromkeys(("description", "signature", "condition_expression", "end_user_argument"), "")
    return {"id": event_name, "name": event_name, "ref": event_name, "type": "off-chain-event", **text}


def conversions(config: PayoutConfig) -> list[dict]:
    """The client's `Conversion[]`: each conversion rule, in the configuration's order. The service keeps no time for
    a rule: `created_at` and `updated_at` are null."""
    return [
        {
            "id": rule.event_name,
            "external_id": external_id(rule.event_name),
            "name": rule.event_name,
            "slug": rule.event_name,
            "enabled": True,
            "triggers": [_trigger(rule.event_name)],
            "payout_terms": [_payout_term(rule, config)],
            "created_at": None,
            "updated_at": None,
        }
        for rule in config.conversions
    ]


# -- the answers, documented (rewards.web.answers) -------------------------------------------------------------------


class Term(Answer):
    """What one payee earns per conversion."""

    amount: str | None = decimal_text("An amount (unit `fixed`) or a percentage (unit `%`); null: nothing", "2")
    currency: str | None = text("`point` or the token's name; null: nothing", "point")
    unit: Literal["%", "fixed", "none"] = text("`%` of the event's amount, `fixed`, or `none`", "fixed")


PayoutTermByTier = create_model(
    "PayoutTermByTier",
    __base__=Answer,
    conversion_name=(str, text("The conversion rule's event name", "purchase")),
    payout_type=(Literal["variable", "fixed"], text("`variable`: a rate of the event's amount", "fixed")),
    payee_type=(Literal["both", "end-user", "affiliate"], text("Who the rule pays", "both")),
    is_multi_level=(bool, text("Whether levels 2-4 earn", True)),
    **{level: (Term, Field(description=f"The {level.removesuffix('_rate')} term")) for level in LEVELS},
    end_user_rate=(Term, Field(description="The end user's term")),
)


class TierPayoutTerms(Answer):
    tier_id: str | None = text(
        "The tier's id; null: the default bucket (affiliates without a tier of their own)", "gold"
    )
    tier_name: str | None = text("Its name", "Gold")
    tier_description: None = text("Always null", None)
    tier_slug: str | None = text("Its id again", "gold")
    tier_rank: int | None = text("Its rank", 2)
    payout_terms: list[PayoutTermByTier] = Field(description="Each conversion rule's terms for this tier")


class TermsByTier(Answer):
    tiers: list[TierPayoutTerms] = Field(description="The default bucket, then every tier by rank (or those asked)")


class Trigger(Answer):
    id: str = text("The conversion's event name", "purchase")
    name: str = text("The same", "purchase")
    ref: str = text("The same", "purchase")
    type: Literal["off-chain-event"] = text("An event sent to the API", "off-chain-event")
    description: str = text("Empty", "")
    signature: str = text("Empty", "")
    condition_expression: str = text("Empty", "")
    end_user_argument: str = text("Empty", "")


class ProjectTier(Answer):
    id: str = text("The tier's id", "gold")
    name: str = text("Its name", "Gold")
    slug: str = text("Its id again", "gold")
    rank: int = text("Its rank", 2)
    description: None = text("Always null", None)


_SOMETIMES = "; present when the rule pays it"
_PayoutGroupFields = create_model(
    "_PayoutGroupFields",
    __base__=Answer,
    id=(str, text("The tier's id", "gold")),
    name=(str, text("Its name", "Gold")),
    **{
        field: spec
        for prefix in ("affiliate", "affiliate2", "affiliate3", "affiliate4", "end_user")
        for field, spec in (
            (f"{prefix}_amount", (str, decimal_text(f"A fixed base's amount{_SOMETIMES}", "20", default=None))),
            (f"{prefix}_amount_percentage",
             (float, exact_number(f"A variable base's percentage{_SOMETIMES}", 6, default=None))),
        )
    },
    project_tier=(ProjectTier, Field(description="The tier")),
)  # fmt: skip


class PayoutGroup(_PayoutGroupFields):
    """A tier's amounts of a rule: `<payee>_amount` for a fixed base, `<payee>_amount_percentage` for a variable one."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"id": "gold", "name": "Gold", "affiliate_amount_percentage": 6, "affiliate2_amount_percentage": 3,
                 "affiliate3_amount_percentage": 1.5, "affiliate4_amount_percentage": 0.6,
                 "end_user_amount_percentage": 15,
                 "project_tier": {"id": "gold", "name": "Gold", "slug": "gold", "rank": 2, "description": None}}
            ]
        }
    )  # fmt: skip


class PayoutTermAnswer(Answer):
    id: str = text("The conversion's event name", "swap")
    scheme: Literal["pay-per-attribution"] = text("Always", "pay-per-attribution")
    tier_type: Literal["audience"] = text("Always", "audience")
    conversion_id: str = text("The conversion's event name", "swap")
    type: Literal["point", "onchain-currency"] = text("The currency kind", "onchain-currency")
    calculation_strategy: Literal["variable", "fixed"] = text("`variable`: a rate of the event's amount", "variable")
    trigger_amount_source: Literal["volume", "revenue"] | None = text("What a variable base is a rate of", "revenue")
    base_currency: Literal["none"] = text("Always", "none")
    payout_currency_address: str | None = text("The token's address; null for points", USDC)
    payout_currency_chain_id: int | None = text("The token's chain id; null for points", 1)
    require_affiliate: bool = text("Always false", False)
    require_approval: bool = text("Always false", False)
    amount_source: Literal["volume", "revenue", "attribution-count"] = text("What the amount counts", "revenue")
    payee_type: Literal["both", "end-user", "affiliate"] = text("Who the rule pays", "affiliate")
    payout_groups: list[PayoutGroup] = Field(description="One per tier, by rank")


class ConversionAnswer(Answer):
    """A conversion rule of the configuration, in the client's `Conversion` shape."""

    id: str = text("Its event name", "swap")
    external_id: int = text("A number derived from its event name (the same in every project)", 187394021763)
    name: str = text("Its event name", "swap")
    slug: str = text("Its event name", "swap")
    enabled: bool = text("Always true", True)
    triggers: list[Trigger] = Field(description="The event that triggers it")
    payout_terms: list[PayoutTermAnswer] = Field(description="Its terms")
    created_at: None = text("Always null (the service keeps no time for a rule)", None)
    updated_at: None = text("Always null", None)
