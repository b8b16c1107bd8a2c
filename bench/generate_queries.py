"""Generate projects for the query benchmarks (bench/queries.py) through the Warehouse and StateStore ports,
so the same SQL fills chdb in-process or a ClickHouse server, and the key lives in either state store.

Rows have exactly the shape the stream workers write (stream_workers/rows.py), generated inside the engine
(INSERT … SELECT over numbers(), in chunks):

- payouts: conversions of 4 payouts each (the user's end-user reward, commissions on levels 1–3), spread
  over 20 payouts per recipient on average and over the last 365 days; every tenth conversion pays USDC
  instead of points (so the summary's `currency = 'point'` has something to leave out).
- claim checks: 30 checks per user (USDC and WETH alternately), claimed in transactions of 3 checks (one
  hash and claim time each). Each group of 3 is left open (30%), closed (20%) or claimed (50%); every change
  is a new row with the next version, as the workers write them (open v1, closed v2, claimed v3): 2.2 rows
  per check on average.
"""

import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from tqdm import tqdm

from rewards.domain.payout_config import PayoutConfig
from rewards.domain.payouts import Payout, PayoutKind, User
from rewards.ports import StateStore, Warehouse
from schemas.entities import CLAIM_CHECK
from stream_workers.rows import PayoutSource, payout_rows

CHUNK = 500_000
CONFIG = {
    "default_tier": "base",
    "tiers": [{"id": "base", "name": "Base", "rank": 1,
               "rates": {"r1": "0.10", "r2": "0.05", "r3": "0.02", "r4": "0"}}],
    "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
                     "end_user_reward": {"fixed": "10"}}],
}  # fmt: skip
ADDRESS = "concat('0x', leftPad(lower(hex(toUInt64({n}) + 1)), 40, '0'))"
YEAR_S = 365 * 86400

# Each column the workers write (stream_workers/rows.py), by name, and the expression that generates it: a migration
# that adds, drops or renames one fails check_columns (run by make test's benchmark smoke test) instead of shifting
# positional values into the wrong columns.
PAYOUT_COLUMNS = {
    "project_id": "{project:String}",
    "payout_id": "concat('conversion:bench-', toString(conversion), ':', toString(level))",
    "source_id": "concat('bench-', toString(conversion))",
    "source_type": "'conversion'",
    "kind": f"if(level = 0, '{PayoutKind.END_USER_REWARD}', '{PayoutKind.COMMISSION}')",
    "role": "if(level = 0, 'user', 'affiliate')",
    "level": "level",
    "recipient_identifier": ADDRESS.format(n="recipient"),
    "recipient_identifier_type": "'evm_address'",
    "amount": "toDecimal256(if(usdc, toUInt64(base * rates[level + 1] * 1000000), base * rates[level + 1]), 18)",
    "currency": "if(usdc, '0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48', 'point')",
    "currency_chain_id": "if(usdc, 1, 0)",
    "currency_name": "if(usdc, 'USDC', '')",
    "currency_decimals": "if(usdc, 6, 0)",
    "happened_at": "happened",
    "created_at": "happened + toIntervalMillisecond(200)",
    "code": "''",
}
PAYOUTS_SQL = f"""
INSERT INTO payouts ({", ".join(PAYOUT_COLUMNS)})
WITH intDiv(number, 4) AS conversion, number % 4 AS level, conversion % 10 = 9 AS usdc,
     cityHash64(conversion) AS h, cityHash64(conversion, level) % {{recipients:UInt64}} AS recipient,
     toDateTime64('2026-01-01 00:00:00', 3, 'UTC') - toIntervalMillisecond(h % ({YEAR_S} * 1000)) AS happened,
     [toDecimal256(1, 18), toDecimal256('0.10', 18), toDecimal256('0.05', 18), toDecimal256('0.02', 18)] AS rates,
     toDecimal256(h % 100000, 18) / 100 AS base
SELECT {", ".join(PAYOUT_COLUMNS.values())}
FROM numbers({{start:UInt64}}, {{count:UInt64}})
"""

# One row per check and version: `number` is the check; version {version} is written for the checks whose
# group of 3 reached that status.
CLAIM_CHECK_COLUMNS = {
    "project_id": "{project:String}",
    "user_identifier_type": "'evm_address'",
    "user_identifier": ADDRESS.format(n="user"),
    "id": "concat('cc_', lower(hex(sipHash128({project:String}, number))))",
    "currency_address": "if(usdc, '0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48', "
                        "'0x4200000000000000000000000000000000000006')",
    "currency_chain_id": "if(usdc, 1, 10)",
    "currency_name": "if(usdc, 'USDC', 'WETH')",
    "currency_decimals": "if(usdc, 6, 18)",
    "amount": "toUInt256(1 + cityHash64(number, 1) % 1000000000)",
    "reason": "if(number % 5 = 0, 'affiliate_payout', 'end_user_payout')",
    "status": "['open', 'closed', 'claimed'][{version:UInt32}]",
    "hash": "if({version:UInt32} = 3, concat('0x', lower(hex(sipHash128({project:String}, user, tx))), "
            "lower(hex(sipHash128(user, tx)))), NULL)",
    "source_id": "concat('bench-', toString(number))",
    "created_at": "created",
    "claimed_at": "if({version:UInt32} = 3, claimed, NULL)",
    "version": "{version:UInt32}",
    "expires_at": "NULL",  # the bench's projects set no claim_check_expiry
}  # fmt: skip
CLAIMS_SQL = f"""
INSERT INTO claim_checks ({", ".join(CLAIM_CHECK_COLUMNS)})
WITH intDiv(number, 30) AS user, intDiv(number % 30, 3) AS tx, number % 2 = 0 AS usdc,
     cityHash64({{project:String}}, user, tx) % 10 AS fate, if(fate < 3, 1, if(fate < 5, 2, 3)) AS reached,
     toDateTime64('2026-01-01 00:00:00', 3, 'UTC') - toIntervalMillisecond(cityHash64(user, tx) % ({YEAR_S} * 1000))
       AS claimed, claimed - toIntervalHour(1 + number % 3 * 24) AS created
SELECT {", ".join(CLAIM_CHECK_COLUMNS.values())}
FROM numbers({{start:UInt64}}, {{count:UInt64}})
WHERE reached >= {{version:UInt32}}
"""


def check_columns() -> None:
    """Raise unless the generated rows have exactly the columns the workers write (their own row builders)."""
    for table, generated, written in (
        ("payouts", PAYOUT_COLUMNS, _worker_payout_columns()),
        ("claim_checks", CLAIM_CHECK_COLUMNS, CLAIM_CHECK.columns()),
    ):
        if set(generated) != set(written):
            missing, extra = sorted(set(written) - set(generated)), sorted(set(generated) - set(written))
            raise RuntimeError(f"bench/generate_queries.py: {table} lacks {missing}, has no longer {extra}")


def _worker_payout_columns() -> list[str]:
    source = PayoutSource("p", "s", "conversion", 0)
    payout = Payout("end_user_reward", "user", 0, User("0x" + "0" * 40, "evm_address"), Decimal(1), "point")
    return list(payout_rows(source, [(0, payout)], 0)[0])


ROWS_PER_CHECK = 2.2


@dataclass(frozen=True)
class Dataset:
    kind: str  # "payouts" | "claims"
    rows: int  # rows written to `payouts`, or to `claim_checks` (every version counts)

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.rows}"

    @property
    def checks(self) -> int:
        return round(self.rows / ROWS_PER_CHECK / 30) * 30

    @property
    def users(self) -> int:
        return self.checks // 30

    @property
    def steps(self) -> list[tuple[str, int, dict]]:
        """(SQL, numbers to run it over, parameters)."""
        if self.kind == "payouts":
            return [(PAYOUTS_SQL, self.rows, {"recipients": max(1, self.rows // 20)})]
        return [(CLAIMS_SQL, self.checks, {"version": version}) for version in (1, 2, 3)]


async def ensure(state: StateStore, warehouse: Warehouse, datasets: list[Dataset], meta_path: Path) -> dict:
    """{dataset name: {project_id, api_key}}: those of an earlier run when both engines still hold them."""
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    await warehouse.migrate()
    for dataset in datasets:
        known = meta.get(dataset.name)
        if known is None or not await _present(state, warehouse, dataset, known):
            meta[dataset.name] = await generate(state, warehouse, dataset)
            meta_path.parent.mkdir(parents=True, exist_ok=True)
            meta_path.write_text(json.dumps(meta, indent=1))
    return {dataset.name: meta[dataset.name] for dataset in datasets}


async def _present(state: StateStore, warehouse: Warehouse, dataset: Dataset, known: dict) -> bool:
    principal = await state.resolve_key(known["api_key"])
    if principal is None or principal.project_id != known["project_id"]:
        return False
    table = "payouts" if dataset.kind == "payouts" else "claim_checks"
    sql = f"SELECT count() > 0 AS present FROM {table} WHERE project_id = {{project:String}}"
    rows = await warehouse.query(sql, {"project": known["project_id"]})
    return bool(int(rows[0]["present"]))


async def generate(state: StateStore, warehouse: Warehouse, dataset: Dataset) -> dict:
    check_columns()
    project_id = await state.create_project(f"bench {dataset.name}")
    api_key = await state.create_key(project_id, ["service_role"])
    await state.put_config(project_id, PayoutConfig.model_validate(CONFIG))
    total = sum(count for _, count, _ in dataset.steps)
    with tqdm(total=total, unit="row", desc=f"generating {dataset.name}", leave=False) as progress:
        for sql, count, params in dataset.steps:
            for start in range(0, count, CHUNK):
                size = min(CHUNK, count - start)
                await warehouse.query(sql, {**params, "project": project_id, "start": start, "count": size})
                progress.update(size)
    # A live system's background merges fold the summary's rows into one per project within minutes: measure
    # that steady state. The claim checks are left as written (their versions in several parts): FINAL's case.
    if dataset.kind == "payouts":
        await warehouse.query("OPTIMIZE TABLE point_totals_by_project FINAL")
    return {"project_id": project_id, "api_key": api_key}
