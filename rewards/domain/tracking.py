"""Tracking events of the published client (API.md §7): `sendPageview`, `identifyUser` and `sendEvent` post a
`FuulEvent` without a dedup id. Pure rules: what makes two of them the same, which codes a pageview names, and the
dedup id of one that pays."""

import hashlib
import json
import uuid
from dataclasses import dataclass

from rewards.domain.codes import normalize_code
from rewards.domain.payouts import User

PAGEVIEW = "pageview"
CONNECT_WALLET = "connect_wallet"
REPEAT_WINDOW_S = 60.0  # exact repeats within this are stored once (API.md §7)
DEDUP_ID_PREFIX = "tracking:"  # the dedup ids of tracking events that pay (conversions)


@dataclass(frozen=True)
class CodeTraffic:
    """A referral code's figures from tracking events: pageviews that named it, and referrals connect_wallet made
    through it."""

    clicks: int = 0
    attributions: int = 0


def _digest(*parts: object) -> str:
    text = json.dumps(parts, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def repeat_key(name: str, tracking_id: str, user: User | None, args: dict, metadata: dict) -> str:
    """What an exact repeat shares, as a fixed-size key: API.md §7's name, metadata.tracking_id, user and args.page;
    and, so that two different events are never taken for repeats, the whole `args` of an event without a page (two
    purchases of a minute are two), and the codes it names (a pageview through an affiliate link right after one
    without is a click)."""
    who = None if user is None else [user.identifier_type, user.identifier]
    page = ["page", args["page"]] if "page" in args else ["args", args]
    return _digest(name, tracking_id, who, page, named_codes(metadata))


def event_id(event: dict, received_ms: int) -> str:
    """A tracking event's id: derived from the request as sent and the time it was received, so the same purchase
    sent again later is a new event (exact repeats within REPEAT_WINDOW_S are dropped before)."""
    return _digest(event, received_ms)[:40]


def dedup_id(event: dict, received_ms: int) -> str:
    """The dedup id of a tracking event that pays (a conversion): `tracking:<event_id>`."""
    return DEDUP_ID_PREFIX + event_id(event, received_ms)


def named_codes(metadata: dict) -> list[str]:
    """The referral codes a pageview may name (`metadata.affiliate_id`, else `metadata.referrer`; the client sends
    both with the same value), as codes are looked up: matched case-insensitively in ASCII."""
    codes = []
    for field in ("affiliate_id", "referrer"):
        value = metadata.get(field)
        if isinstance(value, str) and value and normalize_code(value) not in codes:
            codes.append(normalize_code(value))
    return codes


def names_project(named: str, project_id: str) -> bool:
    """Whether a project id the client sends (the multi-project form) names `project_id`: as it is, or in another
    spelling of the same UUID (dashes, capitals)."""
    if named == project_id:
        return True
    try:
        return uuid.UUID(named).hex == project_id
    except ValueError:
        return False
