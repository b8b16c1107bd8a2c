"""What every leaderboard of the published client shares (API.md §1, §7): its query parameters as the client sends
them, the optional fields a row may ask for, and the answer's wrapper; the query of §1's two leaderboards; and the
answers (documented: rewards.web.answers)."""

from collections.abc import Sequence
from typing import Literal

from fastapi import Depends, Query
from pydantic import Field

from rewards.domain.payouts import User
from rewards.domain.timestamps import format_timestamp, now_ms
from rewards.web.answers import (
    ALICE,
    CODE,
    PROJECT_ID,
    Answer,
    UserIdentity,
    decimal_text,
    exact_number,
    text,
    timestamp,
)
from rewards.web.bounds import time_bound
from rewards.web.errors import bad_request
from rewards.web.numbers import ExactJSONResponse
from rewards.web.requests import Page, PageParams, parse_user

UserType = Literal["affiliate", "end_user"]
USER_TYPE_DOC = "`affiliate`: figures earned as a referrer; `end_user`: as the user; absent: both"
MAX_CURRENCY = 128  # a token currency's address (rewards.domain.payout_config.TokenCurrency)


def board_user(
    user_identifier: str | None = None,
    user_address: str | None = Query(None, description="Deprecated name of user_identifier (an EVM address)"),
    identifier_type: str | None = None,
    user_identifier_type: str | None = Query(None, description="Another name of identifier_type"),
) -> User | None:
    """The user whose row alone is asked for, if any (`results` then holds only its row, with its rank among all)."""
    identifier = user_identifier if user_identifier is not None else user_address
    kind = identifier_type or user_identifier_type
    if identifier is None and kind is None:
        return None
    if kind is None and user_identifier is None:  # the deprecated form names an address
        kind = "evm_address"
    return parse_user(identifier, kind)


def parse_fields(text: str | None, allowed: Sequence[str]) -> frozenset[str]:
    """The optional row fields asked for (`fields=a,b`)."""
    names = [name.strip() for name in (text or "").split(",") if name.strip()]
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise bad_request(f"fields must name some of {', '.join(allowed)} (unknown: {', '.join(unknown)})")
    return frozenset(names)


def parse_currency(text: str | None) -> str | None:
    """A currency address as the figures keep it (lowercase), or None."""
    if text is None:
        return None
    currency = text.strip().lower()
    if not currency or len(currency) > MAX_CURRENCY:
        raise bad_request(f"currency_address must be 1-{MAX_CURRENCY} characters")
    return currency


def calculated_at() -> str:
    """When an answer's figures were read (they hold every write the warehouse had by then)."""
    return format_timestamp(now_ms())


def answer(page: Page, total_results: int, results: list[dict], computed_at: str) -> ExactJSONResponse:
    return ExactJSONResponse(
        {
            "total_results": total_results,
            "page": page.page,
            "page_size": page.size,
            "results": results,
            "calculated_at": computed_at,
        }
    )


def identity(user: User) -> dict:
    return {
        "address": user.identifier,
        "user_identifier": user.identifier,
        "user_identifier_type": user.identifier_type,
    }


# The optional fields of the payouts and points rows (`fields=`); the figures are JSON numbers, as the client declares
# (the payouts rows declare the first four).
OPTIONAL_FIELDS = ("affiliate_code", "tiers", "referred_volume", "referred_users", "enduser_volume", "enduser_revenue")
FIGURE_FIELDS = frozenset({"referred_volume", "referred_users", "enduser_volume", "enduser_revenue"})


# -- the query of §1's leaderboards (GET /payouts/leaderboard/payouts and /users) ---------------------------------


def _window(start: str | None, end: str | None) -> tuple[int | None, int | None]:
    bounds = time_bound("from", start), time_bound("to", end, end=True)
    if None not in bounds and bounds[0] > bounds[1]:
        raise bad_request("from must not be after to")
    return bounds


ROLES = {"affiliate": "affiliate", "end_user": "user"}
# The optional fields the client's PayoutsLeaderboard declares.
PAYOUTS_FIELDS = OPTIONAL_FIELDS[:4]


class LeaderboardQuery:
    """The query of both leaderboards, as §1 and the published client send it (API.md §7): `user_identifier_type` is
    another name of `identifier_type` and `user_address` of `user_identifier`; `user_type` chooses the payouts ranked
    (`affiliate` those earned as an affiliate, `end_user` as a user; absent, the leaderboard's own of §1);
    `currency_address` ranks the payouts in that on-chain currency (raw units) instead of points."""

    def __init__(
        self,
        page: Page = PageParams,
        start: str | None = Query(None, alias="from"),
        end: str | None = Query(None, alias="to"),
        user: User | None = Depends(board_user),
        user_type: UserType | None = Query(
            None, description="`affiliate` or `end_user`; absent: the leaderboard's own"
        ),
        currency_address: str | None = Query(None, description="An on-chain currency's address; absent: points"),
        fields: str | None = Query(
            None, description=f"Optional row fields, comma-separated: {', '.join(PAYOUTS_FIELDS)}"
        ),
    ):
        self.page = page
        self.window = _window(start, end)
        self.user = user
        self.role = ROLES.get(user_type)
        currency = parse_currency(currency_address)
        self.currency = None if currency == "point" else currency
        self.fields = parse_fields(fields, PAYOUTS_FIELDS)


# -- the answers ----------------------------------------------------------------------------------------------------


class Ranked(UserIdentity):
    rank: int = text("The rank: ties share one (1, 2, 2, 4)", 1)
    address: str = text("`user_identifier` again", ALICE)


SOMETIMES = "; only when `fields` names it"


class OptionalFigures(Answer):
    """The optional row fields (`fields=`)."""

    affiliate_code: str | None = text(f"The user's oldest code (null: none){SOMETIMES}", CODE, default=None)
    tiers: dict[str, str] = text(f"Its effective tier, `{{id: name}}` (`{{}}`: none){SOMETIMES}", {"gold": "Gold"},
                                 default=None)  # fmt: skip
    referred_volume: float = exact_number(
        f"The volume of the users below it, levels 1-4{SOMETIMES}", 1250, default=None
    )
    referred_users: int = text(f"The users it referred{SOMETIMES}", 3, default=None)


class EndUserFigures(OptionalFigures):
    enduser_volume: float = exact_number(f"Its own volume as a user{SOMETIMES}", 200, default=None)
    enduser_revenue: float = exact_number(f"Its own revenue as a user{SOMETIMES}", 12.5, default=None)


class PayoutsRow(Ranked, OptionalFigures):
    total_amount: float = exact_number("The points earned in the window (a token's raw units with currency_address)")
    total_attributions: int = text("The payouts the user received in the window", 4)
    chain_id: str = text("The chain of currency_address; empty for points", "")


class UsersRow(PayoutsRow):
    total_amount: str = decimal_text("The points earned in the window (a token's raw units with currency_address)")


class PointsRow(Ranked, EndUserFigures):
    total_amount: float = exact_number("Every point the user earned, as a user and as an affiliate", 130)
    total_attributions: int = text("The conversions that paid the user", 4)


class VolumeRow(Ranked):
    affiliate_code: str | None = text("The user's oldest code (null: none)", CODE)
    total_amount: str = decimal_text("The volume", "1250")
    chain_id: str | None = text("The chain the currency_address names (null without currency_address)", None)


class RevenueRow(Ranked):
    affiliate_code: str | None = text("The user's oldest code (null: none)", CODE)
    total_amount: str = decimal_text("The revenue", "62.5")
    attributions: int = text(f"Conversions with a payout to the user{SOMETIMES}", 4, default=None)
    volume_usd: float = exact_number(f"The volume, in the currencies the events name{SOMETIMES}", 1250, default=None)
    points: float = exact_number(f"The points earned on the same side(s){SOMETIMES}", 130, default=None)


class ReferredRow(Ranked):
    total_referred_users: int = text("The users it referred (level 1), less removed referrals", 3)


class Board(Answer):
    total_results: int = text("The users ranked", 1)
    page: int = text("This page", 1)
    page_size: int = text("Rows a page", 25)
    calculated_at: str = timestamp("When the figures were read")


class PayoutsBoard(Board):
    results: list[PayoutsRow] = Field(description="The page's rows, by rank")


class UsersBoard(Board):
    results: list[UsersRow] = Field(description="The page's rows, by rank")


class PointsBoard(Board):
    results: list[PointsRow] = Field(description="The page's rows, by rank")


class VolumeBoard(Board):
    results: list[VolumeRow] = Field(description="The page's rows, by rank")


class RevenueBoard(Board):
    results: list[RevenueRow] = Field(description="The page's rows, by rank")


class ReferredBoard(Board):
    results: list[ReferredRow] = Field(description="The page's rows, by rank")


class ReferredVolume(Answer):
    user_identifier: str = text("The user", ALICE)
    referred_volume: float = exact_number("The volume of the users below it (levels 1-4); 0 for none", 1250)


class ReferredVolumes(Answer):
    project_id: str = text("The key's project", PROJECT_ID)
    referred_volumes: list[ReferredVolume] = Field(description="One per user asked, in their order")
    total_count: int = text("The users answered", 1)
