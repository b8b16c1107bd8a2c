"""The workers' batch plans in the warehouse (the PlanStore port; what a plan is: stream_workers.plans), on either
warehouse adapter: chdb in the embedded shape, a ClickHouse server in production."""

from rewards.domain.timestamps import now_ms
from rewards.ports import PlanStore
from schemas.clickhouse.values import ch_datetime


class WarehousePlans(PlanStore):
    """Plans in the warehouse (`worker_plans`, schemas/clickhouse/004_dedup_ids.sql): the first claim of a key wins
    because the insert carries the key as its deduplication token (a second insert of it is dropped); past the
    table's deduplication window, the earliest row still wins. Beside the rows the plan protects, so a crash
    cannot keep those rows and lose their plan."""

    READ = "SELECT last_offset FROM worker_plans WHERE plan_key = {key:String} ORDER BY created_at LIMIT 1"

    def __init__(self, warehouse):
        self._warehouse = warehouse

    async def claim(self, key: str, last_offset: int) -> tuple[int, bool]:
        row = {"plan_key": key, "last_offset": last_offset, "created_at": ch_datetime(now_ms())}
        await self._warehouse.insert("worker_plans", [row], f"plan:{key}")
        recorded = int((await self._warehouse.query(self.READ, {"key": key}))[0]["last_offset"])
        return recorded, recorded == last_offset

    async def close(self) -> None:
        pass  # the warehouse is closed by its owner
