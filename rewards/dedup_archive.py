"""DedupArchive on the warehouse: the `dedup_ids` table (schemas/clickhouse/staged/004_dedup_ids.sql), the same
SQL on chdb and on a ClickHouse server.

One query per call, by primary key (project_id, dedup_id): ClickHouse reads one 1,024-row granule per id at most.
"""

from collections.abc import Sequence
from importlib import resources

from rewards.domain.timestamps import now_ms
from rewards.ports import ArchiveUnavailable, Warehouse

KNOWN_AMONG = """
SELECT dedup_id, max(failed) AS failed
FROM dedup_ids
WHERE project_id = {project_id:String} AND dedup_id IN {ids:Array(String)}
  AND accepted_at > fromUnixTimestamp64Milli({cutoff_ms:Int64}, 'UTC')
GROUP BY dedup_id
"""


def ddl() -> list[str]:
    """The forward statements of the dedup_ids migration (staged: not yet among the numbered migrations)."""
    text = resources.files("schemas.clickhouse").joinpath("staged/004_dedup_ids.sql").read_text()
    up = text.split("-- down")[0]
    lines = "\n".join(line for line in up.splitlines() if not line.lstrip().startswith("--"))
    return [statement.strip() for statement in lines.split(";") if statement.strip()]


class WarehouseDedupArchive:
    def __init__(self, warehouse: Warehouse, *, owns_warehouse: bool = False):
        self._warehouse = warehouse
        self._owns = owns_warehouse

    async def known_among(self, project_id: str, dedup_ids: Sequence[str], window_s: float) -> dict[str, str]:
        if not dedup_ids:
            return {}
        params = {"project_id": project_id, "ids": list(dedup_ids), "cutoff_ms": now_ms() - int(window_s * 1000)}
        try:
            rows = await self._warehouse.query(KNOWN_AMONG, params)
        except Exception as exc:
            raise ArchiveUnavailable(f"the dedup archive does not answer: {exc}") from exc
        return {row["dedup_id"]: "failed" if int(row["failed"]) else "processed" for row in rows}

    async def close(self) -> None:
        if self._owns:
            await self._warehouse.close()
