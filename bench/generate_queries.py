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
from pathlib import Path

from tqdm import tqdm

from rewards.domain.payout_config import PayoutConfig
from rewards.ports import StateStore, Warehouse

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

PAYOUTS_SQL = f"""
INSERT INTO payouts
WITH intDiv(number, 4) AS conversion, number % 4 AS level, conversion % 10 = 9 AS usdc,
     cityHash64(conversion) AS h, cityHash64(conversion, level) % {{recipients:UInt64}} AS recipient,
     toDateTime64('2026-01-01 00:00:00', 3, 'UTC') - toIntervalMillisecond(h % ({YEAR_S} * 1000)) AS happened,
     [toDecimal256(1, 18), toDecimal256('0.10', 18), toDecimal256('0.05', 18), toDecimal256('0.02', 18)] AS rates,
     toDecimal256(h % 100000, 18) / 100 AS base
SELECT {{project:String}}, concat('conversion:bench-', toString(conversion), ':', toString(level)),
       concat('bench-', toString(conversion)), 'conversion',
       if(level = 0, 'end_user_reward', 'affiliate_commission'), if(level = 0, 'user', 'affiliate'), level,
       {ADDRESS.format(n="recipient")}, 'evm_address',
       toDecimal256(if(usdc, toUInt64(base * rates[level + 1] * 1000000), base * rates[level + 1]), 18),
       if(usdc, '0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48', 'point'), if(usdc, 1, 0), if(usdc, 'USDC', ''),
       if(usdc, 6, 0), happened, happened + toIntervalMillisecond(200)
FROM numbers({{start:UInt64}}, {{count:UInt64}})
"""

# One row per check and version: `number` is the check; version {version} is written for the checks whose
# group of 3 reached that status.
CLAIMS_SQL = f"""
INSERT INTO claim_checks
WITH intDiv(number, 30) AS user, intDiv(number % 30, 3) AS tx, number % 2 = 0 AS usdc,
     cityHash64({{project:String}}, user, tx) % 10 AS fate, if(fate < 3, 1, if(fate < 5, 2, 3)) AS reached,
     toDateTime64('2026-01-01 00:00:00', 3, 'UTC') - toIntervalMillisecond(cityHash64(user, tx) % ({YEAR_S} * 1000))
       AS claimed, claimed - toIntervalHour(1 + number % 3 * 24) AS created
SELECT {{project:String}}, 'evm_address', {ADDRESS.format(n="user")},
       concat('cc_', lower(hex(sipHash128({{project:String}}, number)))),
       if(usdc, '0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48', '0x4200000000000000000000000000000000000006'),
       if(usdc, 1, 10), if(usdc, 'USDC', 'WETH'), if(usdc, 6, 18),
       toUInt256(1 + cityHash64(number, 1) % 1000000000), if(number % 5 = 0, 'affiliate_payout', 'end_user_payout'),
       ['open', 'closed', 'claimed'][{{version:UInt32}}],
       if({{version:UInt32}} = 3, concat('0x', lower(hex(sipHash128({{project:String}}, user, tx))),
                                        lower(hex(sipHash128(user, tx)))), NULL),
       concat('bench-', toString(number)), created,
       if({{version:UInt32}} = 3, claimed, NULL), {{version:UInt32}}
FROM numbers({{start:UInt64}}, {{count:UInt64}})
WHERE reached >= {{version:UInt32}}
"""
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
