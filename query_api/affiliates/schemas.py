"""The listing's query (API.md §4: its sort keys, date ranges, filters) and the answer of one affiliate (§7's
getAffiliateInfo)."""

from typing import Literal

from query_api.affiliates import service
from rewards.domain.payouts import User
from rewards.domain.timestamps import format_timestamp

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
