"""The listing's query (API.md §4: its sort keys, date ranges, filters) and the answer of one affiliate (§7's
getAffiliateInfo); the answers, documented (rewards.web.answers)."""

from typing import Literal

from pydantic import Field

from query_api.affiliates import service
from rewards.domain.payouts import User
from rewards.domain.timestamps import format_timestamp
from rewards.web.answers import (
    ALICE,
    CODE,
    AffiliateAnswer,
    Answer,
    CodeFigures,
    IdentifierType,
    TierView,
    text,
    timestamp,
)

PER_PAGE = (10, 25, 50, 100)
SortBy = Literal[
    "total_volume", "volume", "r1_volume", "r2_volume", "r3_volume", "r4_volume",
    "total_earnings", "referred_users", "created_at", "name",
]  # fmt: skip
DateRange = Literal["7d", "30d", "90d", "1y", "all"]
RANGE_DAYS = {"7d": 7, "30d": 30, "90d": 90, "1y": 365}
ALLOWED_VALUES = {
    "statuses": ("active", "pending", "suspended"),
    "tax_statuses": ("verified", "pending", "exempt", "missing"),
}


def affiliate_info_json(info: service.AffiliateInfo, user: User) -> dict:
    """The affiliate and each of its codes (oldest first) with their figures, as the client's getAffiliateInfo reads
    them."""
    tier = info.tier
    affiliate = info.affiliate
    return {
        "id": affiliate.id,
        "name": affiliate.name or "",
        "user_identifier": user.identifier,
        "user_identifier_type": user.identifier_type,
        "updated_at": format_timestamp(info.updated_at_ms),
        "region": affiliate.region or "",
        "codes": [
            {
                "code": c.code,
                "created_at": format_timestamp(c.created_at_ms),
                "uses": c.current_uses,
                **info.figures[c.code],
            }
            for c in info.codes
        ],
        "current_tier": None
        if tier is None
        else {"id": tier.id, "name": tier.name, "slug": tier.id, "rank": tier.rank},
    }


# -- the answers ----------------------------------------------------------------------------------------------------


class AffiliatePage(Answer):
    results: list[AffiliateAnswer] = Field(description="The page's affiliates, in the order asked")
    page: int = text("This page", 1)
    per_page: int = text("Affiliates a page", 25)
    total_count: int = text("The affiliates matching", 1)
    total_pages: int = text("Pages in all", 1)


class CodeAvailability(Answer):
    available: bool = text("Whether a code of that name exists and has uses left", True)


class CodeFree(Answer):
    free: bool = text("Whether the text may be chosen as an affiliate code", True)


class AffiliateCodeStats(CodeFigures):
    code: str = text("The code", CODE)
    created_at: str = timestamp("When it was created")
    uses: int = text("Every use (a removed referral's too)", 3)


class AffiliateInfo(Answer):
    """The affiliate and each of its codes, oldest first, with their figures (the client's getAffiliateInfo)."""

    id: str = text("`<identifier type>:<identifier>`", f"evm_address:{ALICE}")
    name: str = text("Its name (empty when unset)", "Alice")
    user_identifier: str = text("The affiliate", ALICE)
    user_identifier_type: IdentifierType = text("Its identifier type", "evm_address")
    updated_at: str = timestamp("The latest of its registration and its codes' creations, renames and rate changes")
    region: str = text("Its region label (empty when unset)", "EU")
    codes: list[AffiliateCodeStats] = Field(description="Its codes, oldest first")
    current_tier: TierView | None = Field(description="Its effective tier; null without one")
