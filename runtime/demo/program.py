"""The demo shop's program and people, drawn from a seed: the same seed makes the same affiliates, referrals and
conversions (only the timestamps move with the clock, as offsets from now).

The tree: LEVELS[0] affiliates at the top, each of them recruits LEVELS[1] affiliates, and so on four levels down
(the payout configuration's r1-r4); every affiliate also refers end users, the deepest most. A conversion by an end
user under the fourth level pays all four levels. A few users came on their own (no referrer)."""

import random
from dataclasses import dataclass

from rewards.domain.timestamps import format_timestamp

PROJECT_NAME = "Demo shop"
EVM = "evm_address"
USDC = {"address": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "chain_id": 1, "name": "USDC", "decimals": 6}
CONFIG = {
    "default_tier": "base",
    "tiers": [
        {"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.1", "r2": "0.05", "r3": "0.02", "r4": "0.01"}},
        {"id": "gold", "name": "Gold", "rank": 2, "rates": {"r1": "0.2", "r2": "0.1", "r3": "0.05", "r4": "0.02"}},
    ],
    "conversions": [
        {"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
         "end_user_reward": {"rate": "0.05"}},
        {"event_name": "swap", "base": {"rate_of": "revenue", "rate": "0.3"}, "currency": USDC,
         "end_user_reward": {"rate": "0.5"}},
    ],
    "referral_reward": {"referrer": "50", "referred": "10"},
}  # fmt: skip

LEVELS = (3, 2, 2, 1)  # affiliates at the top, then how many each affiliate of the level above recruits
END_USERS = (2, 2, 2, 6)  # the end users each affiliate of a level refers
ORGANIC_USERS = 20
SWAP_SHARE = 0.15  # of the conversions; the rest are purchases
DAY_MS = 86_400_000
SPREAD_MS = 29 * DAY_MS  # conversions happen over the last 29 days and today: all inside a `30d` window

# fmt: off
FIRST = ("Alice", "Bruno", "Chen", "Dana", "Elif", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Lucia",
         "Mateo", "Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Viktor", "Wen", "Yara")
LAST = ("Martin", "Chen", "Diaz", "Ivanov", "Sato", "Okafor", "Rossi", "Novak", "Silva", "Kim", "Haddad",
        "Larsen", "Moreau", "Patel", "Schmidt", "Tanaka", "Walsh", "Zhou")
# fmt: on
REGIONS = {"EU": 4, "US": 3, "LATAM": 2, "APAC": 2}
AUDIENCES = {"creators": 3, "traders": 3, "communities": 2, "publishers": 1}
STATUSES = {"active": 17, "pending": 2, "suspended": 1}
TAX_STATUSES = {"verified": 12, "pending": 4, "exempt": 1, "missing": 3}


@dataclass(frozen=True)
class Affiliate:
    address: str
    level: int  # 1: the top of the tree
    recruiter: str | None  # the affiliate whose code it used (None at the top)
    attributes: dict  # name, status, region, audience, tax_status, tier: the body of POST /affiliates


@dataclass(frozen=True)
class People:
    affiliates: list[Affiliate]  # parents before their recruits
    referred: dict[str, list[str]]  # an affiliate's address: the end users it referred
    organic: list[str]  # users with no referrer

    def users(self) -> list[str]:
        referred = [user for users in self.referred.values() for user in users]
        return [a.address for a in self.affiliates] + referred + self.organic


def who(address: str) -> dict:
    return {"user_identifier": address, "user_identifier_type": EVM}


def people(rng: random.Random) -> People:
    names = _names(rng, _affiliate_count())
    affiliates: list[Affiliate] = []
    recruiters: list[str | None] = [None]
    for level, recruits in enumerate(LEVELS, start=1):
        this_level = [
            _affiliate(rng, names.pop(), level, recruiter) for recruiter in recruiters for _ in range(recruits)
        ]
        affiliates += this_level
        recruiters = [a.address for a in this_level]
    referred = {a.address: [_address(rng) for _ in range(END_USERS[a.level - 1])] for a in affiliates}
    return People(affiliates, referred, [_address(rng) for _ in range(ORGANIC_USERS)])


def _names(rng: random.Random, count: int) -> list[str]:
    """Each first and last name used about as often as the others; no two alike (while `count` stays below 72, the
    least common multiple of the two lists' lengths)."""
    firsts, lasts = rng.sample(FIRST, len(FIRST)), rng.sample(LAST, len(LAST))
    return [f"{firsts[n % len(firsts)]} {lasts[n % len(lasts)]}" for n in range(count)]


def _affiliate_count() -> int:
    count, total = 1, 0
    for recruits in LEVELS:
        count *= recruits
        total += count
    return total


def _affiliate(rng: random.Random, name: str, level: int, recruiter: str | None) -> Affiliate:
    attributes = {
        "name": name,
        "status": _pick(rng, STATUSES) if level > 1 else "active",
        "region": _pick(rng, REGIONS),
        "audience": _pick(rng, AUDIENCES),
        "tax_status": _pick(rng, TAX_STATUSES),
        "tier": "gold" if level == 1 or rng.random() < 0.25 else "base",
    }
    return Affiliate(_address(rng), level, recruiter, attributes)


def _pick(rng: random.Random, weights: dict[str, int]) -> str:
    return rng.choices(list(weights), list(weights.values()))[0]


def _address(rng: random.Random) -> str:
    return f"0x{rng.getrandbits(160):040x}"


def conversions(rng: random.Random, group: People, count: int, now_ms: int) -> list[dict]:
    """`count` conversion events by the group's users, a few of them buying much more than the rest, more of them
    lately (the shop grows)."""
    users = group.users()
    activity = [rng.paretovariate(1.3) for _ in users]
    buyers = rng.choices(users, weights=activity, k=count)
    return [_conversion(rng, n, buyer, now_ms - int(SPREAD_MS * rng.random() ** 1.6)) for n, buyer in enumerate(buyers)]


def _conversion(rng: random.Random, n: int, buyer: str, at_ms: int) -> dict:
    if rng.random() < SWAP_SHARE:
        name, arg, cents = "swap", "revenue", rng.randint(200, 40_000)
    else:
        name, arg, cents = "purchase", "value", rng.randint(500, 25_000)
    amount = {"amount": f"{cents // 100}.{cents % 100:02d}", "currency": {"name": "USD"}}
    return {
        **who(buyer),
        "name": name,
        "dedup_id": f"demo-{name}-{n:06d}",
        "timestamp": format_timestamp(at_ms),
        "args": {arg: amount},
        "metadata": {"source": "rewards demo"},
    }


def transaction_hash(rng: random.Random) -> str:
    return f"0x{rng.getrandbits(256):064x}"
