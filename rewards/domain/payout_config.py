"""The project's payout configuration (API.md §6), validated with every problem named."""

import hashlib
import re
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PlainSerializer,
    Tag,
    ValidationError,
    WithJsonSchema,
    field_serializer,
    field_validator,
    model_validator,
)

from rewards.domain.limits import LimitError, check_label, parse_amount, parse_duration_ms
from rewards.domain.timestamps import InvalidTimestamp, format_timestamp, parse_time_ms


def _amount(value: object) -> Decimal:
    try:
        return parse_amount(value)
    except LimitError as exc:
        raise ValueError(str(exc)) from exc


def _timestamp(value: object) -> int:
    try:
        return parse_time_ms(value)
    except InvalidTimestamp as exc:
        raise ValueError(str(exc)) from exc


# Amounts, rates and times within API.md §3's limits (rewards.domain.limits), like an event's.
# Written as plain decimals, as they are read (str() would write 1E-18, which the grammar refuses).
_PLAIN = PlainSerializer(lambda value: format(value, "f"), return_type=str, when_used="json")
Amount = Annotated[Decimal, BeforeValidator(_amount), _PLAIN]
TierRate = Annotated[Decimal, BeforeValidator(_amount), Field(le=1), _PLAIN]
# Read from ISO 8601 or epoch milliseconds (documented so: the BeforeValidator would leave the schema an integer).
TimestampMs = Annotated[
    int,
    BeforeValidator(_timestamp),
    WithJsonSchema({"anyOf": [{"type": "string", "format": "date-time"}, {"type": "integer"}]}, mode="validation"),
]


def _label(value: object) -> object:
    try:
        return check_label(value) if isinstance(value, str) else value
    except LimitError as exc:
        raise ValueError(str(exc)) from exc


Label = Annotated[str, AfterValidator(_label)]  # a tier id: what the listing's `tiers` filter names
# The fields a document must name: without them a PUT of `{}` would silently wipe the configuration.
REQUIRED_FIELDS = ("default_tier", "tiers")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Rates(_Strict):
    r1: TierRate
    r2: TierRate
    r3: TierRate
    r4: TierRate

    def at_level(self, level: int) -> Decimal:
        return (self.r1, self.r2, self.r3, self.r4)[level - 1]


class Tier(_Strict):
    id: Label = Field(min_length=1, max_length=64)
    name: str = Field(min_length=1, max_length=128)
    rank: int = Field(ge=-(2**31), lt=2**31, strict=True)  # strict: `false` is no rank
    rates: Rates


class Base(_Strict):
    fixed: Amount | None = None
    rate_of: Literal["value", "revenue"] | None = None
    rate: Amount | None = None

    @model_validator(mode="after")
    def _one_form(self) -> "Base":
        if (self.fixed is None) == (self.rate_of is None or self.rate is None):
            raise ValueError("base needs either fixed, or rate_of and rate")
        return self


class Reward(_Strict):
    fixed: Amount | None = None
    rate: Amount | None = None

    @model_validator(mode="after")
    def _one_form(self) -> "Reward":
        if (self.fixed is None) == (self.rate is None):
            raise ValueError("reward needs exactly one of fixed or rate")
        return self


class TokenCurrency(_Strict):
    address: str = Field(min_length=1, max_length=128)

    @field_validator("address")
    @classmethod
    def _not_points(cls, address: str) -> str:
        # Payouts record a token's address where points record `point`: a token so named would count as points.
        if address.lower() == "point":
            raise ValueError("must not be 'point' (the name of points)")
        return address

    chain_id: int = Field(ge=0, lt=2**63, strict=True)
    name: str = Field(min_length=1, max_length=64)
    decimals: int = Field(ge=0, le=36, strict=True)


def _currency_kind(value: object) -> str:
    return "token" if isinstance(value, dict | TokenCurrency) else "point"


# Tagged, so that a bad token currency is reported once, under its own fields (not once per union member).
Currency = Annotated[
    Annotated[Literal["point"], Tag("point")] | Annotated[TokenCurrency, Tag("token")],
    Discriminator(_currency_kind),
]
_UNION_TAGS = ("point", "token")


class VolumeCurrency(_Strict):
    """The currency volume and revenue figures count (API.md §6), named as events name their amounts' currency
    (`args.value.currency`): by `name` ("USD"), or by `identifier` (a token's address). Case-insensitive."""

    name: str | None = Field(None, min_length=1, max_length=64)
    identifier: str | None = Field(None, min_length=1, max_length=128)

    @model_validator(mode="after")
    def _one_name(self) -> "VolumeCurrency":
        if (self.name is None) == (self.identifier is None):
            raise ValueError("volume_currency needs exactly one of name or identifier")
        return self


class Conversion(_Strict):
    event_name: str = Field(min_length=1, max_length=128)
    base: Base
    currency: Currency = "point"
    end_user_reward: Reward | None = None


def external_id(event_name: str) -> int:
    """A conversion's number (the published client's `external_id`, API.md §7): 48 bits of a hash of its event name,
    exact in a JS number."""
    return int(hashlib.sha256(event_name.encode()).hexdigest()[:12], 16)


class ReferralReward(_Strict):
    referrer: Amount = Decimal(0)
    referred: Amount = Decimal(0)


class Campaign(_Strict):
    id: str = Field(min_length=1, max_length=64)
    event_names: list[Annotated[str, Field(min_length=1, max_length=128)]]
    starts_at: TimestampMs
    ends_at: TimestampMs
    bonus: Amount

    @field_serializer("starts_at", "ends_at")
    def _iso(self, ms: int) -> str:
        return format_timestamp(ms)

    @model_validator(mode="after")
    def _ordered(self) -> "Campaign":
        if self.ends_at <= self.starts_at:
            raise ValueError("ends_at must be after starts_at")
        return self


_EVM_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


def _contract_address(value: str) -> str:
    if _EVM_ADDRESS.fullmatch(value) is None:
        raise ValueError("must be an EVM address: 0x and 40 hex digits")
    return value.lower()


ContractAddress = Annotated[str, AfterValidator(_contract_address)]


def _window(value: object) -> object:
    """A cap's window as written (`30d`, `calendar_month`, `all_time`), checked: API.md §8's durations grammar."""
    if isinstance(value, str) and value not in NAMED_WINDOWS:
        try:
            parse_duration_ms(value)
        except LimitError as exc:
            raise ValueError(f"window {exc}, or one of {', '.join(NAMED_WINDOWS)}") from exc
    return value


NAMED_WINDOWS = ("calendar_month", "all_time")
MAX_LIMITS = 100  # caps, and budgets: each a few counters per payout (rewards.domain.allotment)
Window = Annotated[str, Field(max_length=16), AfterValidator(_window)]


def _duration(value: str) -> str:
    try:
        parse_duration_ms(value)
    except LimitError as exc:
        raise ValueError(str(exc)) from exc
    return value


Duration = Annotated[str, Field(max_length=16), AfterValidator(_duration)]  # `90d`: API.md §8's durations
LimitCurrency = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(str.lower)]


class _Limit(_Strict):
    currency: LimitCurrency  # "point", or a token's address (any case: payouts' currencies are matched in lowercase)
    amount: Amount

    @model_validator(mode="after")
    def _raw_token_units(self) -> "_Limit":
        if self.currency != "point" and self.amount != self.amount.to_integral_value():
            raise ValueError("a token's amount is a raw integer of its smallest unit (API.md §0)")
        return self


class Cap(_Limit):
    """The most a user earns in a currency over a window (API.md §8): as the user, as a referrer, or both."""

    applies_to: Literal["end_user", "referrer", "wallet"]
    window: Window

    @property
    def key(self) -> tuple[str, str, str]:
        return self.applies_to, self.currency, self.window


class Budget(_Limit):
    """The most the project pays in a currency, all time (API.md §8)."""


class Approval(_Strict):
    """API.md §9's Pending Approval mode: a payout in one of `currencies` whose amount exceeds `above` (absent: every
    one) waits for an operator's decision."""

    currencies: list[LimitCurrency] = Field(min_length=1, max_length=MAX_LIMITS)
    above: Amount | None = None

    def holds(self, currency: str, amount) -> bool:
        return currency in self.currencies and (self.above is None or amount > self.above)


class PayoutConfig(_Strict):
    default_tier: str | None = None
    tiers: list[Tier] = []
    conversions: list[Conversion] = []
    referral_reward: ReferralReward | None = None
    campaigns: list[Campaign] = []
    # Volume and revenue figures never add two currencies (rewards.domain.figure_currency): they count the amounts in
    # this one, and those naming none.
    volume_currency: VolumeCurrency = VolumeCurrency(name="USD")
    # The on-chain contract that pays claim checks (API.md §7): the EIP-712 domain's verifyingContract and the signed
    # forms' project_address (rewards.domain.claim_signing). Kept lowercase; absent, forms name the zero address.
    claim_contract_address: ContractAddress | None = None
    # API.md §7: the published client's signed writes must carry their user's valid signature (off: the signatures
    # are stored, not checked). What is signed, by whom, and what verifies: rewards.domain.signatures.
    verify_signatures: bool = False
    # API.md §8: enforced by the workers' allotment (rewards.domain.allotment, docs/architecture.md).
    caps: list[Cap] = Field([], max_length=MAX_LIMITS)
    # A closed claim check not claimed this long after closing expires (API.md §8); None: never.
    claim_check_expiry: Duration | None = None
    budgets: list[Budget] = Field([], max_length=MAX_LIMITS)
    # API.md §9: whether GET /claimable-rewards (no key) may answer this project's users' claimable amounts.
    public_claimable_rewards: bool = True
    # API.md §9: token payouts' claim checks wait as pending_acceptance until their user accepts them (EIP-191).
    require_acceptance: bool = False
    # API.md §9: payouts that wait for an operator's approval (None: none does).
    approval: Approval | None = None

    @field_validator("caps")
    @classmethod
    def _unique_caps(cls, caps: list[Cap]) -> list[Cap]:
        if len({cap.key for cap in caps}) != len(caps):
            raise ValueError("each (applies_to, currency, window) may appear in one cap only")
        return caps

    @field_validator("budgets")
    @classmethod
    def _unique_budgets(cls, budgets: list[Budget]) -> list[Budget]:
        if len({budget.currency for budget in budgets}) != len(budgets):
            raise ValueError("each currency may have one budget only")
        return budgets

    @field_validator("tiers")
    @classmethod
    def _unique_tiers(cls, tiers: list[Tier]) -> list[Tier]:
        ids = [tier.id for tier in tiers]
        if len(ids) != len(set(ids)):
            raise ValueError("tier ids must be unique")
        return tiers

    @field_validator("conversions")
    @classmethod
    def _unique_conversions(cls, conversions: list[Conversion]) -> list[Conversion]:
        names = [conversion.event_name for conversion in conversions]
        if len(names) != len(set(names)):
            raise ValueError("each event_name may appear in one conversion only")
        return conversions

    @model_validator(mode="after")
    def _default_tier_exists(self) -> "PayoutConfig":
        if self.default_tier is not None and self.tier(self.default_tier) is None:
            raise ValueError(f"default_tier {self.default_tier!r} is not one of the tiers")
        return self

    def tier(self, tier_id: str | None) -> Tier | None:
        return next((tier for tier in self.tiers if tier.id == tier_id), None)

    def effective_tier(self, own_tier: str | None) -> Tier | None:
        return self.tier(own_tier) or self.tier(self.default_tier)

    @property
    def claim_check_expiry_ms(self) -> int | None:
        return None if self.claim_check_expiry is None else parse_duration_ms(self.claim_check_expiry)

    def conversion_for(self, event_name: str) -> Conversion | None:
        return next((c for c in self.conversions if c.event_name == event_name), None)


class InvalidConfig(ValueError):
    def __init__(self, errors: list[dict]):
        super().__init__(f"{len(errors)} problems")
        self.errors = errors  # pydantic's error dicts (type, loc, ctx)


def config_from_document(document: object) -> PayoutConfig:
    """A configuration sent by a user (PUT, `rewards project config`): every field of API.md §6 checked
    and the required ones present, or InvalidConfig naming every problem."""
    errors = []
    if isinstance(document, dict):
        errors += [{"type": "missing", "loc": (name,)} for name in REQUIRED_FIELDS if name not in document]
    try:
        config = PayoutConfig.model_validate(document)
    except ValidationError as exc:
        errors += [_untagged(error) for error in exc.errors()]
    if errors:
        raise InvalidConfig(errors)
    return config


def _untagged(error: dict) -> dict:
    """The error's location without the currency union's tag (`currency.token.chain_id` → `currency.chain_id`)."""
    loc = error["loc"]
    keep = [part for i, part in enumerate(loc) if not (i > 0 and loc[i - 1] == "currency" and part in _UNION_TAGS)]
    return {**error, "loc": tuple(keep)}


EMPTY_CONFIG = PayoutConfig()  # a project's configuration before any is loaded: pays nothing
