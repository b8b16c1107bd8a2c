"""The project's payout configuration (API.md §6), validated with every problem named."""

from decimal import Decimal
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_serializer, field_validator, model_validator

from rewards.domain.amounts import InvalidAmount, parse_decimal
from rewards.domain.timestamps import InvalidTimestamp, format_timestamp, parse_timestamp_ms


def _decimal(value: object) -> Decimal:
    try:
        return parse_decimal(value)
    except InvalidAmount as exc:
        raise ValueError(str(exc)) from exc


def _timestamp(value: object) -> int:
    try:
        return parse_timestamp_ms(value)
    except InvalidTimestamp as exc:
        raise ValueError(str(exc)) from exc


DecimalValue = Annotated[Decimal, BeforeValidator(_decimal)]
Rate = Annotated[Decimal, BeforeValidator(_decimal), Field(ge=0, le=1)]
NonNegative = Annotated[Decimal, BeforeValidator(_decimal), Field(ge=0)]
TimestampMs = Annotated[int, BeforeValidator(_timestamp)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Rates(_Strict):
    r1: Rate
    r2: Rate
    r3: Rate
    r4: Rate

    def at_level(self, level: int) -> Decimal:
        return (self.r1, self.r2, self.r3, self.r4)[level - 1]


class Tier(_Strict):
    id: str = Field(min_length=1, max_length=64)
    name: str = Field(min_length=1, max_length=128)
    rank: int
    rates: Rates


class Base(_Strict):
    fixed: NonNegative | None = None
    rate_of: Literal["value", "revenue"] | None = None
    rate: NonNegative | None = None

    @model_validator(mode="after")
    def _one_form(self) -> "Base":
        if (self.fixed is None) == (self.rate_of is None or self.rate is None):
            raise ValueError("base needs either fixed, or rate_of and rate")
        return self


class Reward(_Strict):
    fixed: NonNegative | None = None
    rate: NonNegative | None = None

    @model_validator(mode="after")
    def _one_form(self) -> "Reward":
        if (self.fixed is None) == (self.rate is None):
            raise ValueError("reward needs exactly one of fixed or rate")
        return self


class TokenCurrency(_Strict):
    address: str = Field(min_length=1, max_length=128)
    chain_id: int
    name: str = Field(min_length=1, max_length=64)
    decimals: int = Field(ge=0, le=36)


class Conversion(_Strict):
    event_name: str = Field(min_length=1, max_length=128)
    base: Base
    currency: Literal["point"] | TokenCurrency = "point"
    end_user_reward: Reward | None = None


class ReferralReward(_Strict):
    referrer: NonNegative = Decimal(0)
    referred: NonNegative = Decimal(0)


class Campaign(_Strict):
    id: str = Field(min_length=1, max_length=64)
    event_names: list[str]
    starts_at: TimestampMs
    ends_at: TimestampMs
    bonus: NonNegative

    @field_serializer("starts_at", "ends_at")
    def _iso(self, ms: int) -> str:
        return format_timestamp(ms)

    @model_validator(mode="after")
    def _ordered(self) -> "Campaign":
        if self.ends_at <= self.starts_at:
            raise ValueError("ends_at must be after starts_at")
        return self


class PayoutConfig(_Strict):
    default_tier: str | None = None
    tiers: list[Tier] = []
    conversions: list[Conversion] = []
    referral_reward: ReferralReward | None = None
    campaigns: list[Campaign] = []

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

    def conversion_for(self, event_name: str) -> Conversion | None:
        return next((c for c in self.conversions if c.event_name == event_name), None)


EMPTY_CONFIG = PayoutConfig()
