"""API.md §7: the published client's leaderboards (docs/fuul-sdk-7.41.0-surface.md G5, and G1's getPayoutsLeaderboard
with the filters the client adds) through the real client, on both shapes: each method's request as the client builds
it (the type sent as `user_identifier_type` or `identifier_type`, the deprecated `user_address`, the comma-joined
`user_identifiers`), each answer in the JSON types the client declares, with the figures the events paid, and equal to
what the server answers over plain HTTP.

One project per shape: 1 refers 2 and 4, 2 refers 3. Purchases pay points (r1 0.1, r2 0.05, 10 to the buyer), a swap
pays USDC (tests/compat/test_compat_sdk.py's CONFIG)."""

import pytest

from tests.compat.test_compat_sdk import (  # noqa: F401 (fixtures used by name)
    CONFIG,
    EVM,
    TOKEN,
    Shop,
    addr,
    failed,
    ok,
    sdk_installed,
    who,
)
from tests.compat.test_compat_sdk import without_time as untimed


@pytest.fixture(scope="module")
def shop(client_base) -> Shop:
    shop = Shop(*client_base)
    assert shop.http.put("/projects/config", json=CONFIG).status_code == 200
    shop.refer(1, 2)
    shop.refer(2, 3)
    shop.refer(1, 4)
    events = [
        {**who(n), "name": "purchase", "dedup_id": f"p{n}", "args": {"value": {"amount": amount}}}
        for n, amount in ((2, "100"), (3, "50.5"), (4, "100"))
    ]
    events.append({**who(3), "name": "swap", "dedup_id": "s3", "args": {"revenue": {"amount": "20"}}})
    assert shop.http.post("/events/batch", json={"events": events}).json() == {"ingested_events": 4}
    shop.http.wait_processed("p2", "p3", "p4", "s3")
    yield shop
    shop.http.close()


def rows(board: dict, *fields: str) -> list[tuple]:
    return [(row["rank"], row["address"], *(row[field] for field in fields)) for row in board["results"]]


def same_as_held(shop: Shop, answer: dict, path: str, **params) -> dict:
    """The client's answer, checked equal to the server's over plain HTTP (but for when each was computed)."""
    assert answer["calculated_at"].endswith("Z")
    assert untimed(answer) == untimed(shop.read(path, **params))
    return answer


def test_points_leaderboard_through_the_client(shop):
    board, mine, deprecated, fields = shop.sdk(
        shop.standard_key,
        ("getPointsLeaderboard", {"page": 1, "page_size": 10}),
        ("getPointsLeaderboard", {"user_identifier": addr(3), "identifier_type": EVM}),  # sent as user_identifier_type
        ("getPointsLeaderboard", {"user_address": addr(4)}),
        ("getPointsLeaderboard", {"fields": "referred_volume,referred_users,enduser_volume", "page_size": 2}),
    )
    board = same_as_held(shop, ok(board), "/payouts/leaderboard/points", page=1, page_size=10)
    # 1: r1 of 2's and 4's buys (10 + 10), r2 of 3's (2.525); 2: 10 reward + r1 of 3's buy (5.05); 3 and 4: 10
    assert rows(board, "total_amount", "total_attributions") == [
        (1, addr(1), 22.525, 4), (2, addr(2), 15.05, 3), (3, addr(3), 10, 2), (3, addr(4), 10, 1)
    ]  # fmt: skip
    assert board["total_results"] == 4 and all(isinstance(r["total_amount"], int | float) for r in board["results"])
    assert rows(ok(mine)) == [(3, addr(3))]
    assert rows(ok(deprecated)) == [(3, addr(4))]
    top = ok(fields)["results"]
    assert [(r["referred_volume"], r["referred_users"], r["enduser_volume"]) for r in top] == [
        (250.5, 2, 0), (50.5, 1, 100)
    ]  # fmt: skip


def test_volume_and_revenue_leaderboards_through_the_client(shop):
    own, referred, both, mine, revenue, bad = shop.sdk(
        shop.standard_key,
        ("getVolumeLeaderboard", {"user_type": "end_user"}),
        ("getVolumeLeaderboard", {"user_type": "affiliate", "page": 1, "page_size": 10}),
        ("getVolumeLeaderboard", {}),
        ("getVolumeLeaderboard", {"user_identifier": addr(3), "user_identifier_type": EVM}),  # sent as identifier_type
        ("getRevenueLeaderboard", {"user_type": "affiliate", "fields": "attributions,volume_usd,points"}),
        ("getVolumeLeaderboard", {"user_type": "everyone"}),
    )
    own = same_as_held(shop, ok(own), "/payouts/leaderboard/volume", user_type="end_user")
    assert rows(own, "total_amount", "chain_id") == [
        (1, addr(2), "100", None), (1, addr(4), "100", None), (3, addr(3), "50.5", None)
    ]  # fmt: skip
    assert own["results"][0]["affiliate_code"] == shop.read("/referral_codes", **who(2))["results"][0]["code"]
    assert rows(ok(referred), "total_amount") == [(1, addr(1), "250.5"), (2, addr(2), "50.5")]
    assert rows(ok(both), "total_amount") == [
        (1, addr(1), "250.5"), (2, addr(2), "150.5"), (3, addr(4), "100"), (4, addr(3), "50.5")
    ]  # fmt: skip
    assert rows(ok(mine), "total_amount") == [(4, addr(3), "50.5")]
    # 3's swap (revenue 20) counts for 2 (r1) and 1 (r2): a tie. The optional figures are numbers.
    revenue = same_as_held(shop, ok(revenue), "/payouts/leaderboard/revenue", user_type="affiliate",
                           fields="attributions,volume_usd,points")  # fmt: skip
    assert rows(revenue, "total_amount", "attributions", "volume_usd", "points") == [
        (1, addr(1), "20", 4, 250.5, 22.525), (1, addr(2), "20", 2, 50.5, 5.05)
    ]  # fmt: skip
    assert "user_type" in str(failed(bad, 400)["message"])


def test_referred_users_and_referred_volume_through_the_client(shop):
    referred, volumes, as_email, empty = shop.sdk(
        shop.standard_key,
        ("getReferredUsersLeaderboard", {"page": 1, "page_size": 10}),
        ("getReferredVolume", {"user_identifiers": [addr(1), addr(2), addr(5)]}),  # comma-joined by the client
        ("getReferredVolume", {"user_identifiers": ["nobody@example.com"], "identifier_type": "email"}),
        ("getReferredVolume", {"user_identifiers": []}),
    )
    referred = same_as_held(shop, ok(referred), "/leaderboard/referred", page=1, page_size=10)
    assert rows(referred, "total_referred_users") == [(1, addr(1), 2), (2, addr(2), 1)]
    assert ok(volumes) == {
        "project_id": shop.project_id,
        "referred_volumes": [
            {"user_identifier": addr(1), "referred_volume": 250.5},
            {"user_identifier": addr(2), "referred_volume": 50.5},
            {"user_identifier": addr(5), "referred_volume": 0},
        ],
        "total_count": 3,
    }
    assert ok(as_email)["referred_volumes"] == [{"user_identifier": "nobody@example.com", "referred_volume": 0}]
    assert "user_identifiers" in str(failed(empty, 400)["message"])


def test_payouts_leaderboard_filters_through_the_client(shop):
    usdc, end_users, deprecated = shop.sdk(
        shop.standard_key,
        ("getPayoutsLeaderboard", {"currency_address": TOKEN["address"].upper().replace("0X", "0x")}),
        ("getPayoutsLeaderboard", {"user_type": "end_user", "fields": "referred_users"}),
        ("getPayoutsLeaderboard", {"user_address": addr(2)}),
    )
    # The swap's base is 6 USDC: r1 0.6 to 2, r2 0.3 to 1, in raw units (6 decimals), on the token's chain.
    assert rows(ok(usdc), "total_amount", "chain_id") == [(1, addr(2), 600_000, "1"), (2, addr(1), 300_000, "1")]
    end_users = ok(end_users)
    assert rows(end_users, "total_amount", "referred_users", "chain_id") == [
        (1, addr(2), 10, 1, ""), (1, addr(3), 10, 0, ""), (1, addr(4), 10, 0, "")
    ]  # fmt: skip
    assert rows(ok(deprecated), "total_amount") == [(2, addr(2), 5.05)]
