"""The query of a user's payout reads (API.md §7: the user, the currency kind, the page, the caller's project) and the
shapes of their answers as the published client declares them (docs/fuul-sdk-7.41.0-surface.md, G6; documented:
rewards.web.answers)."""

from decimal import Decimal
from typing import Literal

from fastapi import Query
from pydantic import ConfigDict, Field, RootModel

from query_api.user_payouts import service
from rewards.domain.referrals import json_number
from rewards.domain.timestamps import format_timestamp
from rewards.domain.tracking import names_project
from rewards.ports import Principal
from rewards.web.answers import (
    ALICE,
    BOB,
    CODE,
    PROJECT_ID,
    USDC,
    Answer,
    decimal_text,
    exact_number,
    example_of,
    text,
    timestamp,
)
from rewards.web.dependencies import Caller
from rewards.web.errors import ApiError
from rewards.web.requests import PageParams, parse_user

Kind = Literal["point", "onchain-currency"]
ONCHAIN = "onchain-currency"


def _check_project(project_id: str | None, principal: Principal) -> None:
    """The client sends `project_id` when its caller gives one: it must name the key's project (never another's)."""
    if project_id is not None and not names_project(project_id, principal.project_id):
        raise ApiError(403, "project_id is not this key's project")


class UserQuery:
    """The query of the by-conversion and movements reads: the user (`identifier_type`, as the client sends it, or
    `user_identifier_type`), the currency kind, the page, and the caller's `project_id`, checked."""

    def __init__(
        self,
        principal: Caller,
        kind: Kind = Query(alias="type", description="`point`, or `onchain-currency` (tokens)"),
        user_identifier: str | None = None,
        identifier_type: str | None = None,
        user_identifier_type: str | None = None,
        project_id: str | None = Query(None, description="Optional; when sent, the key's project"),
        page=PageParams,
    ):
        _check_project(project_id, principal)
        self.user = parse_user(user_identifier, identifier_type or user_identifier_type)
        self.onchain = kind == ONCHAIN
        self.page = page
        self.project_id = principal.project_id

    def answer(self, total: int, results: list[dict]) -> dict:
        return {"total_results": total, "page": self.page.page, "page_size": self.page.size, "results": results}


def currency_json(currency: service.Currency, chain_id_type: type) -> dict:
    return {"currency_address": currency.address, "chain_id": chain_id_type(currency.chain_id)}


def earning_items(amounts: dict[service.Currency, Decimal]) -> list[dict]:
    """The client's `EarningItem`s: points as the currency `{"address": "point", "chainId": null}`, first; tokens by
    their address and chain id (a string); amounts are JSON numbers (raw integers of a token's smallest unit)."""
    ordered = sorted(amounts.items(), key=lambda item: (item[0].address != service.POINT, item[0].chain_id,
                                                        item[0].address))  # fmt: skip
    return [
        {
            "currency": {
                "address": currency.address,
                "chainId": None if currency.address == service.POINT else str(currency.chain_id),
            },
            "amount": json_number(amount),
        }
        for currency, amount in ordered
    ]


def referred_json(referred: service.Referred, referrer_identifier: str) -> dict:
    return {
        referred.user.identifier: {
            "volume": json_number(referred.volume),
            "direct_eligible_volume": json_number(referred.direct_volume),
            "indirect_eligible_volume": json_number(referred.indirect_volume),
            "earnings": earning_items(referred.direct_commissions),
            "total_commission_earned": earning_items(referred.commissions),
            "date_joined": None if referred.joined_ms is None else format_timestamp(referred.joined_ms),
            "event_referrer_identifier": referrer_identifier,
            "user_rebate_rate": None if referred.rebate_rate is None else json_number(referred.rebate_rate),
            "referral_code": None if referred.referral is None else referred.referral.code,
        }
    }


# -- the answers ----------------------------------------------------------------------------------------------------

TOKENS_ONLY = "; only with type=onchain-currency"


class ConversionPayout(Answer):
    is_referrer: bool = text("Whether the user earned these as a referrer (commissions, a referrer's referral reward)",
                             True)  # fmt: skip
    total_amount: str = decimal_text("The payouts' sum (a token's raw units)", "80")
    conversion_id: str = text("The conversion's event name (`referral_reward` for referral rewards)", "purchase")
    conversion_name: str = text("The same", "purchase")
    currency_address: str = text(f"The token's address{TOKENS_ONLY}", USDC, default=None)
    chain_id: str = text(f"The token's chain id, as a string{TOKENS_ONLY}", "1", default=None)


class Movement(Answer):
    date: str = timestamp("When the payout's event happened")
    currency_address: str = text(f"The token's address{TOKENS_ONLY}", USDC, default=None)
    chain_id: int = text(f"The token's chain id{TOKENS_ONLY}", 1, default=None)
    is_referrer: bool = text("Whether the user earned it as a referrer", True)
    conversion_id: str = text("The conversion's event name (`referral_reward` for a referral reward)", "purchase")
    conversion_name: str = text("The same", "purchase")
    total_amount: str = decimal_text("The payout (a token's raw units)", "20")
    project_name: str = text("The project's id", PROJECT_ID)
    payout_status: Literal["paid", "open", "closed", "claimed", "rejected"] = text(
        "`paid` for points; the claim check's status for a token; `rejected` for a payout the rules refused", "paid"
    )
    payout_status_details: (
        Literal["blocklisted", "self_referral", "cap_exceeded", "budget_exhausted", "rejected_by_operator"] | None
    ) = text("Why a rejected payout was refused (API.md §8); null otherwise", None)
    id: str = text(
        "The payout's id (a rejected payout's ends in `:rejected`: a cap splits a payout into a paid part and a "
        "rejected rest under one id)",
        "conversion:order-1042:0",
    )
    reversal: bool = text(
        "Whether it is a reversing movement (API.md §9): the share of a payout a reversal took back, a negative "
        "amount of the same kind, level and recipient; its id is the payout's with `:reversal:<reversal id>`",
        False,
    )


class PayoutPage(Answer):
    total_results: int = text("Rows in all", 1)
    page: int = text("This page", 1)
    page_size: int = text("Rows a page", 25)


class ConversionPayouts(PayoutPage):
    results: list[ConversionPayout] = Field(description="Per conversion, as a referrer or not (per currency: tokens)")


class Movements(PayoutPage):
    results: list[Movement] = Field(description="One row per payout, newest first")


class EarningCurrency(Answer):
    address: str = text("`point`, or the token's address", "point")
    chainId: str | None = text("The token's chain id, as a string; null for points", None)


class EarningItem(Answer):
    currency: EarningCurrency
    amount: float = exact_number("The amount (a token's raw units)", 20)


class ReferredFigures(Answer):
    volume: float = exact_number("The user's own volume", 200)
    direct_eligible_volume: float = exact_number("Its conversions' volume where the referrer stood at level 1", 200)
    indirect_eligible_volume: float = exact_number("Its downline's, where the referrer stood at levels 2-4", 0)
    earnings: list[EarningItem] = Field(description="The referrer's level-1 commissions from the user, per currency")
    total_commission_earned: list[EarningItem] = Field(description="Its commissions at levels 1-4, per currency")
    date_joined: str | None = timestamp("When the referrer first referred the user")
    event_referrer_identifier: str = text("The referrer", ALICE)
    user_rebate_rate: float | None = exact_number("The rebate rate of the code that referred the user", 0.1)
    referral_code: str | None = text("The code of the user's current referral by the referrer", CODE)


class ReferredUser(RootModel[dict[str, ReferredFigures]]):
    """A one-key object: the referred user's identifier, and what it brought the referrer."""

    model_config = ConfigDict(json_schema_extra={"examples": [{BOB: example_of(ReferredFigures)}]})
