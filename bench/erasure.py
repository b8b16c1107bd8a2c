"""What an erasure round costs the warehouse (API.md §11; rewards.adapters.warehouse_erasure): 1M payouts of 100k
users (with their conversions, and every view the migrations make fed from them) on chdb, then rounds erasing 1
user (the baseline: the cost is per round, not per user) and 1,000 users. Prints a table; checks that the project's
total is the same after and that no erased identifier is left in `payouts`.

    python -m bench.erasure [--payouts 1000000] [--users 100000]
"""

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from rewards.adapters import warehouse_erasure
from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
from rewards.domain import erasure
from rewards.domain.payouts import User

PROJECT = "bench"
TYPE = "evm_address"

_CONVERSIONS = """
INSERT INTO conversions (project_id, dedup_id, name, user_identifier, user_identifier_type, timestamp, received_at,
                         batch_id, args, metadata)
SELECT 'bench', toString(number), 'purchase', {user}, 'evm_address', now64(3) - number, now64(3), 'b', '{{}}', '{{}}'
FROM numbers({n})
"""
_PAYOUTS = """
INSERT INTO payouts (project_id, payout_id, source_id, source_type, kind, role, level, recipient_identifier,
                     recipient_identifier_type, amount, currency, currency_chain_id, currency_name, currency_decimals,
                     happened_at, created_at)
SELECT 'bench', toString(number), toString(number), 'conversion', 'end_user_reward', 'end_user', 0, {user},
       'evm_address', toDecimal256(number % 97, 18), 'point', 0, 'POINT', 0, now64(3) - number, now64(3)
FROM numbers({n})
"""


def user_of(n: int) -> str:
    return "0x" + format(n, "040x")


def _user_sql(users: int) -> str:
    """user_of(number % users), in SQL."""
    return f"concat('0x', leftPad(lower(hex(number % {users})), 40, '0'))"


async def _total(warehouse: ChdbWarehouse) -> str:
    rows = await warehouse.query("SELECT toString(sum(amount)) AS s FROM payouts WHERE project_id = 'bench'")
    return rows[0]["s"]


async def run(payouts: int, users: int) -> list[tuple[str, float, list[str]]]:
    with tempfile.TemporaryDirectory() as folder:
        warehouse = ChdbWarehouse(Path(folder))
        await warehouse.migrate()
        user = _user_sql(users)
        await warehouse.command(_CONVERSIONS.format(user=user, n=payouts))
        await warehouse.command(_PAYOUTS.format(user=user, n=payouts))
        before = await _total(warehouse)
        salt, rows = erasure.new_salt(), []
        for label, first, count in (("1 user (baseline)", 0, 1), ("1,000 users", 1, 1000)):
            batch = {(PROJECT, User(user_of(n), TYPE)): erasure.pseudonym(salt, User(user_of(n), TYPE))
                     for n in range(first, first + count)}  # fmt: skip
            started = time.perf_counter()
            tables = await warehouse_erasure.erase_users(warehouse, batch)
            rows.append((label, time.perf_counter() - started, tables))
        assert await _total(warehouse) == before, "the total changed"
        left = await warehouse.query(
            "SELECT count() AS n FROM payouts WHERE recipient_identifier IN {ids:Array(String)}",
            {"ids": [user_of(n) for n in range(1001)]},
        )
        assert int(left[0]["n"]) == 0, "an erased identifier is left"
        await warehouse.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payouts", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    args = parser.parse_args()
    rows = asyncio.run(run(args.payouts, args.users))
    print(f"erasure round, {args.payouts:,} payouts and conversions of {args.users:,} users (chdb)")
    print(f"{'round':<20} {'seconds':>8} {'tables rewritten':>17}")
    for label, seconds, tables in rows:
        print(f"{label:<20} {seconds:>8.2f} {len(tables):>17}")
    print("tables:", ", ".join(rows[-1][2]))


if __name__ == "__main__":
    main()
