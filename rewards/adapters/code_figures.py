"""The CodeFigures port on the warehouse: each referral or affiliate code's referred users and its owner's earnings
through it, from the `code_stats` view (schemas/clickhouse/007_code_stats.sql). A renamed code's rows are under each of
its names (they stay its own), so its figures are summed over all of them. What a code is, and whose, is the
ReferralStore's; these are its figures only."""

from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal

from rewards.domain.amounts import exact_sum
from rewards.domain.referrals import CodeRecord, CodeStats
from rewards.ports import Warehouse
from schemas.clickhouse.values import param_chunks

CODE_STATS = """
SELECT code, toString(sum(referred)) AS referred, toString(sum(removed)) AS removed,
       toString(sum(earnings)) AS earnings
FROM code_stats
WHERE project_id = {project:String} AND code IN {codes:Array(String)}
GROUP BY code
"""


class WarehouseCodeFigures:
    def __init__(self, warehouse: Warehouse):
        self._warehouse = warehouse

    async def of_codes(self, project_id: str, codes: Sequence[CodeRecord]) -> dict[str, CodeStats]:
        return await code_stats(self._warehouse, project_id, codes)


async def code_stats(warehouse: Warehouse, project_id: str, codes: Sequence[CodeRecord]) -> dict[str, CodeStats]:
    """Each code's figures by its current name (zeros for a code without any), summed over all its names."""
    code_of = {name: record.code for record in codes for name in record.all_names}
    users: dict[str, int] = defaultdict(int)
    earnings: dict[str, list[Decimal]] = defaultdict(list)
    for chunk in param_chunks(sorted(code_of)):
        for row in await warehouse.query(CODE_STATS, {"project": project_id, "codes": chunk}):
            code = code_of[row["code"]]
            users[code] += int(row["referred"]) - int(row["removed"])
            earnings[code].append(Decimal(row["earnings"]))
    return {record.code: CodeStats(max(users[record.code], 0), exact_sum(earnings[record.code])) for record in codes}
