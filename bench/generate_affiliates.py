"""Generate a project with many affiliates and conversions, in an embedded data dir (`generate`) or on any
state store and warehouse (`generate_in`: the production shape, Redis and a ClickHouse server).

    python -m bench.generate_affiliates --data-dir bench-data --affiliates 100000 --conversions 1000000

The warehouse is written through the Warehouse port, so the same SQL fills chdb or a ClickHouse server. The
affiliates and one code each go through the StateStore port, except in the embedded shape, where they are
inserted straight into the SQLite state file (much faster, same rows).

Rows are written with the same tables, in the same shape, as the stream workers write them, so the
materialized views fill exactly as in production; the generation itself runs inside ClickHouse
(INSERT … SELECT over numbers()), which is what makes a million conversions take seconds, not hours.

The shape: affiliates form a 4-ary referral tree (affiliate i was referred by affiliate (i-1)/4);
end users are referred by affiliate `user % affiliates`; each conversion is a purchase by user
`n % users` with a value (its base) of 1–1000 points and a tenth of it as revenue, spread over the last 365 days,
paying commissions on up to 4 levels at the base tier's rates. Every fifth affiliate is gold; statuses, regions,
audiences and tax statuses cycle. The conversions are written before their volumes and payouts, as a delivery
writes them: the affiliate portal's views join them (schemas/clickhouse/011_affiliate_portal.sql).
"""

import asyncio
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import typer
from tqdm import tqdm

from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.payouts import User
from rewards.ports import Affiliate, StateStore, Warehouse
from runtime.wiring import open_embedded_state, state_path

CONFIG = {
    "default_tier": "base",
    "tiers": [
        {"id": "base", "name": "Base", "rank": 1, "rates": {"r1": "0.10", "r2": "0.05", "r3": "0.02", "r4": "0.01"}},
        {"id": "gold", "name": "Gold", "rank": 2, "rates": {"r1": "0.20", "r2": "0.10", "r3": "0.05", "r4": "0.02"}},
    ],
    "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point"}],
}

CHUNK = 100_000
STATE_CHUNK = 500  # affiliates stored concurrently through the StateStore port
STATE_CONNECTIONS = 50  # of those, in flight at once
MERGED_TABLES = (
    "affiliates", "affiliate_stats", "affiliate_stats_daily", "affiliate_stats_daily_by_user", "affiliate_listing",
    "affiliate_portal_daily", "affiliate_portal_earnings_daily", "affiliate_portal_totals", "referral_edges",
    "user_conversions_daily",
)  # fmt: skip
STATUSES, REGIONS = ("active", "pending", "suspended"), ("EU", "US", "APAC", "LATAM")
AUDIENCES, TAXES = ("crypto", "gaming", "defi"), ("verified", "pending", "exempt", "missing")
ADDRESS = "concat('0x', leftPad(lower(hex(toUInt64({n}) + 1)), 40, '0'))"
USER_ADDRESS = "concat('0x', leftPad(lower(hex(toUInt64({n}) + 1000000000)), 40, '0'))"
RATES = "[toDecimal256('0.10', 18), toDecimal256('0.05', 18), toDecimal256('0.02', 18), toDecimal256('0.01', 18)]"

AFFILIATES_SQL = f"""
INSERT INTO affiliates (project_id, user_identifier_type, user_identifier, id, name, status, region, audience,
                        tax_status, tier, created_at)
SELECT {{project:String}}, 'evm_address', {ADDRESS.format(n="number")} AS address,
       concat('evm_address:', address), concat('Affiliate ', toString(number)),
       ['active', 'pending', 'suspended'][number % 3 + 1], ['EU', 'US', 'APAC', 'LATAM'][number % 4 + 1],
       ['crypto', 'gaming', 'defi'][number % 3 + 1], ['verified', 'pending', 'exempt', 'missing'][number % 4 + 1],
       if(number % 5 = 0, 'gold', NULL), now64(3) - toIntervalSecond(number)
FROM numbers({{start:UInt64}}, {{count:UInt64}})
"""

CODES_SQL = f"""
INSERT INTO referral_codes (project_id, owner_identifier_type, owner_identifier, code, created_at)
SELECT {{project:String}}, 'evm_address', {ADDRESS.format(n="number")}, upper(substring(hex(cityHash64(number)), 1, 8)),
       now64(3)
FROM numbers({{start:UInt64}}, {{count:UInt64}})
"""

# Affiliates referred by their parent in the tree, then end users referred by `user % affiliates`.
AFFILIATE_REFERRALS_SQL = f"""
INSERT INTO referrals (project_id, user_identifier_type, user_identifier, referrer_identifier_type,
                       referrer_identifier, code, referred_at)
SELECT {{project:String}}, 'evm_address', {ADDRESS.format(n="number")}, 'evm_address',
       {ADDRESS.format(n="intDiv(number - 1, 4)")}, 'CODE', now64(3)
FROM numbers({{start:UInt64}}, {{count:UInt64}}) WHERE number > 0
"""
USER_REFERRALS_SQL = f"""
INSERT INTO referrals (project_id, user_identifier_type, user_identifier, referrer_identifier_type,
                       referrer_identifier, code, referred_at)
SELECT {{project:String}}, 'evm_address', {USER_ADDRESS.format(n="number")}, 'evm_address',
       {ADDRESS.format(n="number % {affiliates:UInt64}")}, 'CODE', now64(3)
FROM numbers({{start:UInt64}}, {{count:UInt64}})
"""

# One conversion per number: user `n % users`, its time and value; `now` is one instant for every statement, so that
# a conversion's volume and payout rows carry its very time.
CONVERSION = """
WITH number % {users:UInt64} AS user, toDecimal256(1 + number % 1000, 18) AS base,
     {now:DateTime64(3, 'UTC')} - toIntervalSecond(cityHash64(number) % (365 * 86400)) AS happened
"""
CONVERSIONS_SQL = f"""
INSERT INTO conversions (project_id, dedup_id, name, user_identifier, user_identifier_type, timestamp, received_at,
                         batch_id, args, metadata)
{CONVERSION}
SELECT {{project:String}}, concat('bench-', toString(number)), 'purchase', {USER_ADDRESS.format(n="user")},
       'evm_address', happened, happened, 'bench',
       concat('{{"value":{{"amount":"', toString(base), '"}},"revenue":{{"amount":"', toString(base / 10), '"}}}}'),
       '{{}}'
FROM numbers({{start:UInt64}}, {{count:UInt64}})
"""

# One row per conversion and level of the chain: L1 = user % affiliates, L(k+1) = parent of Lk.
CHAIN = """
WITH number % {users:UInt64} AS user, toInt64(user % {affiliates:UInt64}) AS a1,
     if(a1 > 0, intDiv(a1 - 1, 4), -1) AS a2, if(a2 > 0, intDiv(a2 - 1, 4), -1) AS a3,
     if(a3 > 0, intDiv(a3 - 1, 4), -1) AS a4,
     arrayJoin(arrayFilter(x -> x.2 >= 0, [(1, a1), (2, toInt64(a2)), (3, toInt64(a3)), (4, toInt64(a4))])) AS link,
     toDecimal256(1 + number % 1000, 18) AS base,
     {now:DateTime64(3, 'UTC')} - toIntervalSecond(cityHash64(number) % (365 * 86400)) AS happened
"""
VOLUMES_SQL = f"""
INSERT INTO affiliate_volumes (project_id, source_id, level, affiliate_identifier_type, affiliate_identifier, base,
                               happened_at)
{CHAIN}
SELECT {{project:String}}, concat('bench-', toString(number)), link.1, 'evm_address',
       {ADDRESS.format(n="link.2")}, base, happened
FROM numbers({{start:UInt64}}, {{count:UInt64}})
"""
PAYOUTS_SQL = f"""
INSERT INTO payouts (project_id, payout_id, source_id, source_type, kind, role, level, recipient_identifier,
                     recipient_identifier_type, amount, currency, currency_chain_id, currency_name, currency_decimals,
                     happened_at, created_at)
{CHAIN}
SELECT {{project:String}}, concat('conversion:bench-', toString(number), ':', toString(link.1)),
       concat('bench-', toString(number)), 'conversion', 'affiliate_commission', 'affiliate', link.1,
       {ADDRESS.format(n="link.2")}, 'evm_address', toDecimal256(base * {RATES}[link.1], 18), 'point', 0, '', 0,
       happened, happened
FROM numbers({{start:UInt64}}, {{count:UInt64}})
"""


async def generate(data_dir: Path, affiliates: int, conversions: int) -> dict:
    """The embedded shape: the state file filled directly (fast), the warehouse through the port."""
    state = open_embedded_state(data_dir)
    project_id, api_key = await _project(state)
    await state.close()
    _state_rows(data_dir, project_id, affiliates)
    warehouse = ChdbWarehouse(data_dir / "warehouse")
    try:
        await warehouse.migrate()
        await fill_warehouse(warehouse, project_id, affiliates, conversions)
    finally:
        await warehouse.close()
    return {"data_dir": str(data_dir), "project_id": project_id, "api_key": api_key}


async def generate_in(state: StateStore, warehouse: Warehouse, affiliates: int, conversions: int) -> dict:
    """Any shape (the production one: Redis and a ClickHouse server), through the ports only."""
    project_id, api_key = await _project(state)
    await store_affiliates(state, project_id, affiliates)
    await warehouse.migrate()
    await fill_warehouse(warehouse, project_id, affiliates, conversions)
    return {"project_id": project_id, "api_key": api_key}


async def _project(state: StateStore) -> tuple[str, str]:
    project_id = await state.create_project("bench")
    api_key = await state.create_key(project_id, ["service_role"])
    await state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    return project_id, api_key


async def fill_warehouse(warehouse: Warehouse, project_id: str, affiliates: int, conversions: int) -> None:
    users = max(affiliates * 2, 1)
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.000")
    params = {"project": project_id, "affiliates": affiliates, "users": users, "now": now}
    steps = [
        (AFFILIATES_SQL, affiliates), (CODES_SQL, affiliates), (AFFILIATE_REFERRALS_SQL, affiliates),
        (USER_REFERRALS_SQL, users), (CONVERSIONS_SQL, conversions), (VOLUMES_SQL, conversions),
        (PAYOUTS_SQL, conversions),
    ]  # fmt: skip
    with tqdm(total=sum(count for _, count in steps), unit="row", desc="generating") as progress:
        for sql, total in steps:
            for start in range(0, total, CHUNK):
                count = min(CHUNK, total - start)
                await warehouse.query(sql, {**params, "start": start, "count": count})
                progress.update(count)
    # A live system's background merges fold each affiliate's rows together within minutes; measure that
    # steady state, not the moment right after a bulk load.
    for table in MERGED_TABLES:
        await warehouse.query(f"OPTIMIZE TABLE {table} FINAL")


async def store_affiliates(state: StateStore, project_id: str, affiliates: int) -> None:
    """The affiliates and one code each through the StateStore port, STATE_CHUNK at a time concurrently."""
    # The Redis client's pool holds 100 connections: any more calls at once fail instead of waiting.
    connections = asyncio.Semaphore(STATE_CONNECTIONS)
    with tqdm(total=affiliates, unit="affiliate", desc="state store") as progress:
        for start in range(0, affiliates, STATE_CHUNK):
            chunk = range(start, min(start + STATE_CHUNK, affiliates))
            await asyncio.gather(*(_store_affiliate(state, project_id, n, connections) for n in chunk))
            progress.update(len(chunk))


async def _store_affiliate(state: StateStore, project_id: str, n: int, connections: asyncio.Semaphore) -> None:
    async with connections:
        await _store_one(state, project_id, n)


async def _store_one(state: StateStore, project_id: str, n: int) -> None:
    user = User(f"0x{n + 1:040x}", "evm_address")
    affiliate = Affiliate(
        id=f"evm_address:{user.identifier}", user=user, name=f"Affiliate {n}", status=STATUSES[n % 3],
        region=REGIONS[n % 4], audience=AUDIENCES[n % 3], tax_status=TAXES[n % 4],
        tier="gold" if n % 5 == 0 else None, created_at_ms=n,
    )  # fmt: skip
    # The warehouse rows are written by fill_warehouse, so nothing is published inside the blocks.
    async with state.create_affiliate(project_id, affiliate):
        pass
    async with state.create_codes(project_id, user, 1, None):
        pass


def _state_rows(data_dir: Path, project_id: str, affiliates: int) -> None:
    """The same affiliates, and one code each, in the state store (a listing page reads them there)."""
    with sqlite3.connect(state_path(data_dir)) as db:
        db.executemany(
            "INSERT INTO affiliates (project_id, user_type, user_id, id, name, status, region, audience, tax_status,"
            " tier, created_ms) VALUES (?, 'evm_address', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(project_id, f"0x{n + 1:040x}", f"evm_address:0x{n + 1:040x}", f"Affiliate {n}", STATUSES[n % 3],
              REGIONS[n % 4], AUDIENCES[n % 3], TAXES[n % 4], "gold" if n % 5 == 0 else None, n)
             for n in range(affiliates)],
        )  # fmt: skip
        db.executemany(
            "INSERT INTO codes (project_id, code, owner_type, owner_id, max_uses, current_uses, created_ms, seq) "
            "VALUES (?, ?, 'evm_address', ?, NULL, 0, 0, ?)",
            [(project_id, f"B{n:07d}", f"0x{n + 1:040x}", n + 1) for n in range(affiliates)],
        )


def main(
    data_dir: Path = typer.Option(Path("bench-data"), help="A new embedded data dir"),
    affiliates: int = typer.Option(100_000),
    conversions: int = typer.Option(1_000_000),
) -> None:
    if (data_dir / "warehouse").exists():
        raise typer.BadParameter(f"{data_dir} already holds data: pick a new directory")
    result = asyncio.run(generate(data_dir, affiliates, conversions))
    (data_dir / "bench.json").write_text(json.dumps(result))
    typer.echo(json.dumps(result))


if __name__ == "__main__":
    typer.run(main)
