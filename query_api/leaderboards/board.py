"""What every leaderboard of the published client shares (API.md §1, §7): its query parameters as the client sends
them, the optional fields a row may ask for, and the answer's wrapper."""

from collections.abc import Sequence
from typing import Literal

from fastapi import Query

from query_api.leaderboards import service
from rewards.domain.payouts import User
from rewards.domain.timestamps import format_timestamp, now_ms
from rewards.ports import StateStore
from rewards.web.errors import bad_request
from rewards.web.numbers import ExactJSONResponse
from rewards.web.requests import Page, parse_user

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


async def affiliate_codes(state: StateStore, project_id: str, users: Sequence[User]) -> dict[User, str]:
    """Each user's oldest code (the one the client's `Affiliate.code` shows), for those who have one."""
    codes = await state.codes_of(project_id, users) if users else {}
    return {user: names[-1] for user, names in codes.items()}  # codes_of lists them newest first


async def effective_tiers(state: StateStore, project_id: str, users: Sequence[User]) -> dict[User, dict[str, str]]:
    """Each user's effective tier (its own as a registered affiliate, else the default) as `{tier id: tier name}`;
    `{}` without one."""
    config = await state.get_config(project_id)
    affiliates = await state.affiliates_among(project_id, users) if users else {}
    tiers = {}
    for user in users:
        tier = config.effective_tier(affiliates[user].tier if user in affiliates else None)
        tiers[user] = {} if tier is None else {tier.id: tier.name}
    return tiers


# The optional fields of the payouts and points rows (`fields=`); the figures are JSON numbers, as the client declares
# (the payouts rows declare the first four).
OPTIONAL_FIELDS = ("affiliate_code", "tiers", "referred_volume", "referred_users", "enduser_volume", "enduser_revenue")
FIGURE_FIELDS = frozenset({"referred_volume", "referred_users", "enduser_volume", "enduser_revenue"})


async def optional_fields(
    state: StateStore, project_id: str, users: Sequence[User], chosen: frozenset[str], figures: service.UserFigures
) -> dict[User, dict]:
    """The fields of `chosen` for each of `users`: referred figures as a referrer (all levels), end-user ones as the
    user."""
    codes = await affiliate_codes(state, project_id, users) if "affiliate_code" in chosen else {}
    tiers = await effective_tiers(state, project_id, users) if "tiers" in chosen else {}
    extras = {}
    for user in users:
        referred = figures.of(user, (service.AFFILIATE,))
        own = figures.of(user, (service.USER,))
        every: dict[str, object] = {
            "affiliate_code": codes.get(user),
            "tiers": tiers.get(user),
            "referred_volume": referred.volume,
            "referred_users": referred.referred_users,
            "enduser_volume": own.volume,
            "enduser_revenue": own.revenue,
        }
        extras[user] = {name: value for name, value in every.items() if name in chosen}
    return extras
