"""Migration 012 (volume currency) on what was written before it, on both engines: the §4 volumes lose the bases of
conversions that paid a token, and §7's volume and revenue count USD and the amounts naming no currency, the default
every project had; the rest of the figures are rebuilt as they were. Its down section brings 011's figures back."""

import json

from rewards.adapters import migrations
from tests.schemas.test_migrations import SHIPPED, place, server_place, warehouse  # noqa: F401 (the fixtures, both engines)

PROJECT = "p012"
ALICE, BOB = "0x" + "a" * 40, "0x" + "b" * 40
TIME = "2026-11-20 10:00:00.000"
USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"


def conversion(dedup_id: str, args: dict, name: str = "purchase") -> dict:
    return {
        "project_id": PROJECT, "dedup_id": dedup_id, "name": name, "user_identifier": BOB,
        "user_identifier_type": "evm_address", "timestamp": TIME, "received_at": TIME, "batch_id": "b",
        "args": json.dumps(args), "metadata": "{}",
    }  # fmt: skip


def commission(dedup_id: str, amount: str, currency: str = "point") -> dict:
    return {
        "project_id": PROJECT, "payout_id": f"conversion:{dedup_id}:0", "source_id": dedup_id,
        "source_type": "conversion", "kind": "affiliate_commission", "role": "affiliate", "level": 1,
        "recipient_identifier": ALICE, "recipient_identifier_type": "evm_address", "amount": amount,
        "currency": currency, "currency_chain_id": 1 if currency != "point" else 0,
        "currency_name": "USDC" if currency != "point" else "", "currency_decimals": 6 if currency != "point" else 0,
        "happened_at": TIME, "created_at": TIME,
    }  # fmt: skip


def volume(dedup_id: str, base: str) -> dict:
    return {
        "project_id": PROJECT, "source_id": dedup_id, "level": 1, "affiliate_identifier_type": "evm_address",
        "affiliate_identifier": ALICE, "base": base, "happened_at": TIME,
    }  # fmt: skip


# Written by the workers before 012: 200 USD, 50 EUR and 7 (no currency) of purchases paying points, and a swap of
# 100 USD of revenue whose base (30) and commission (3 USDC) are in USDC.
CONVERSIONS = [
    conversion("usd", {"value": {"amount": "200", "currency": {"name": "USD"}}}),
    conversion("eur", {"value": {"amount": "50", "currency": {"name": "EUR"}}}),
    conversion("none", {"value": {"amount": 7}}),
    conversion("swap", {"revenue": {"amount": "100", "currency": "usd"}}, name="swap"),
]
PAYOUTS = [commission("usd", "20"), commission("eur", "5"), commission("none", "0.7"), commission("swap", "3", USDC)]
VOLUMES = [volume("usd", "200"), volume("eur", "50"), volume("none", "7"), volume("swap", "30")]

FIGURES = {
    "listing": "SELECT toString(sum(total_volume)) AS v, toString(sum(earnings)) AS e FROM affiliate_listing",
    "stats": "SELECT toString(sum(r1_volume)) AS v, toString(sum(earnings)) AS e FROM affiliate_stats",
    "daily": "SELECT toString(sum(r1_volume)) AS v FROM affiliate_stats_daily_by_user",
    "own": "SELECT toString(sum(volume)) AS v, toString(sum(revenue)) AS r FROM user_conversions_daily",
    "portal": "SELECT toString(sum(volume)) AS v, toString(sum(revenue)) AS r, toString(sum(attributions)) AS n"
    " FROM affiliate_portal_daily",
    "boards": "SELECT side, toString(sum(volume)) AS v, toString(sum(revenue)) AS r FROM leaderboard_figures"
    " WHERE volume > 0 OR revenue > 0 GROUP BY side ORDER BY side",
    "by_referrer": "SELECT toString(sum(direct_volume)) AS v FROM referrer_earnings_daily",
}
COUNTED_BOARDS = (
    "SELECT side, toString(sum(counted_volume)) AS v, toString(sum(counted_revenue)) AS r FROM leaderboard_figures"
    " WHERE volume > 0 OR revenue > 0 GROUP BY side ORDER BY side"
)
BASES = "SELECT source_id, toString(base) AS base, toString(counted_base) AS counted FROM affiliate_volumes ORDER BY 1"


async def figures(engine) -> dict:
    return {name: await engine.query(sql) for name, sql in FIGURES.items()}


async def test_012_recounts_every_volume_in_one_currency(warehouse):  # noqa: F811
    await migrations.migrate(warehouse, target=11)
    for table, rows in (("conversions", CONVERSIONS), ("payouts", PAYOUTS), ("affiliate_volumes", VOLUMES)):
        await warehouse.insert(table, rows, f"before-012:{table}")
    before = await figures(warehouse)
    assert before["listing"] == [{"v": "287", "e": "25.7"}]  # 200 + 50 + 7 points and 30 USDC: two currencies
    assert before["own"] == [{"v": "257", "r": "100"}]  # USD, EUR and no currency

    await migrations.migrate(warehouse, target=12)
    after = await figures(warehouse)
    assert await warehouse.query(BASES) == [
        {"source_id": "eur", "base": "50", "counted": "50"}, {"source_id": "none", "base": "7", "counted": "7"},
        {"source_id": "swap", "base": "30", "counted": "0"}, {"source_id": "usd", "base": "200", "counted": "200"},
    ]  # fmt: skip
    assert after["listing"] == [{"v": "257", "e": "25.7"}]  # points only; earnings as they were
    assert after["stats"] == [{"v": "257", "e": "25.7"}] and after["daily"] == [{"v": "257"}]
    assert after["own"] == [{"v": "207", "r": "100"}]  # USD and the 7 naming none; not the 50 EUR
    assert after["portal"] == [{"v": "207", "r": "100", "n": "4"}]  # every conversion still attributed
    assert after["by_referrer"] == [{"v": "207"}]
    # The leaderboards keep the raw amounts (for `currency_address`) beside the counted ones.
    assert after["boards"] == before["boards"] == [
        {"side": "affiliate", "v": "257", "r": "100"}, {"side": "user", "v": "257", "r": "100"}
    ]  # fmt: skip
    assert await warehouse.query(COUNTED_BOARDS) == [
        {"side": "affiliate", "v": "207", "r": "100"}, {"side": "user", "v": "207", "r": "100"}
    ]  # fmt: skip

    await migrations.migrate(warehouse, target=12)  # nothing left to run: the figures stay
    assert await figures(warehouse) == after

    assert (await migrations.migrate(warehouse, target=11)).summary()["reverted"] == [12]
    assert await figures(warehouse) == before  # 011's figures, from the args and bases kept as they were
    assert (await migrations.migrate(warehouse)).summary()["applied"] == list(range(12, SHIPPED + 1))
    assert await figures(warehouse) == after
