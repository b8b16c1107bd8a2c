"""What the warehouse has written, by project, kind and id: the `dedup_ids` table (schemas/clickhouse/
004_dedup_ids.sql), the same SQL on chdb and on a ClickHouse server.

Two readers: the ingest edge (`WarehouseDedupArchive`, the DedupArchive port: event ids past Redis's hot window)
and the workers (`written_among`: every id of a delivery Redis has not marked done, and state changes).
One query per chunk of ids (schemas.clickhouse.values.param_chunks), by primary key (project_id, kind,
dedup_id): ClickHouse reads one 256-row granule per id at most (migration 005).
"""

from collections.abc import Iterable, Sequence

from rewards.domain.timestamps import now_ms
from rewards.ports import ArchiveUnavailable, Warehouse
from schemas.clickhouse.values import param_chunks

EVENT, CODE_USE, AFFILIATE, CODES_CREATED = "event", "code_use", "affiliate", "codes_created"
REFERRAL_REMOVED = "referral_removed"  # a referral removed (API.md §7): its removal's id
REVERSAL = "reversal"  # a reversal (API.md §9): its own id
REPLAY = "replay"  # a record replayed from the dead letters: `<its kind>:<its id>:<the dead letter's id>`
PAYOUT_DECISION = "payout_decision"  # an operator's decision on a held payout (API.md §9): the payout's id

# The latest row of an id tells: an event set aside, then replayed from the dead letters and written, has a failed
# row and a later processed one (stream_workers/handlers/conversion.py).
WRITTEN_AMONG = """
SELECT project_id, kind, dedup_id, argMax(failed, accepted_at) AS failed
FROM dedup_ids
WHERE project_id IN {projects:Array(String)} AND kind IN {kinds:Array(String)} AND dedup_id IN {ids:Array(String)}
  AND accepted_at > fromUnixTimestamp64Milli({cutoff_ms:Int64}, 'UTC')
GROUP BY project_id, kind, dedup_id
"""

WRITTEN_SINCE = """
SELECT DISTINCT dedup_id
FROM dedup_ids
WHERE project_id = {project_id:String} AND kind = {kind:String}
  AND accepted_at > fromUnixTimestamp64Milli({since_ms:Int64}, 'UTC')
"""


async def written_among(
    warehouse: Warehouse, project_id: str, keys: Iterable[tuple[str, str]], window_s: float
) -> dict[tuple[str, str], str]:
    """Those of `keys` ((kind, id) pairs) written within the last `window_s`: (kind, id) → `processed` | `failed`."""
    return (await written_among_projects(warehouse, {project_id: set(keys)}, window_s)).get(project_id, {})


async def written_among_projects(
    warehouse: Warehouse, keys: dict[str, set[tuple[str, str]]], window_s: float
) -> dict[str, dict[tuple[str, str], str]]:
    """`written_among` of several projects' keys in one query per chunk of ids (a query costs ClickHouse ~5 ms of CPU
    whatever its size, and a worker's delivery holds several projects): project → (kind, id) → status."""
    keys = {project_id: set(project_keys) for project_id, project_keys in keys.items() if project_keys}
    if not keys:
        return {}
    kinds = sorted({kind for project_keys in keys.values() for kind, _ in project_keys})
    cutoff_ms, projects = now_ms() - int(window_s * 1000), sorted(keys)
    ids = sorted({dedup_id for project_keys in keys.values() for _, dedup_id in project_keys})
    found: dict[str, dict[tuple[str, str], str]] = {}
    for chunk in param_chunks(ids):  # one query per chunk
        params = {"projects": projects, "kinds": kinds, "ids": chunk, "cutoff_ms": cutoff_ms}
        for row in await warehouse.query(WRITTEN_AMONG, params):
            key = (row["kind"], row["dedup_id"])
            if key in keys.get(row["project_id"], ()):  # an id asked of one project may be another's too
                found.setdefault(row["project_id"], {})[key] = "failed" if int(row["failed"]) else "processed"
    return found


def row(project_id: str, kind: str, dedup_id: str, accepted_at: str, failed: bool = False) -> dict:
    """A `dedup_ids` row (`accepted_at` as schemas.clickhouse.values.ch_datetime writes it)."""
    return {
        "project_id": project_id, "kind": kind, "dedup_id": dedup_id, "accepted_at": accepted_at, "failed": int(failed),
    }  # fmt: skip


class WarehouseDedupArchive:
    """The DedupArchive port: event ids the warehouse holds, for Redis's ids past the hot window."""

    def __init__(self, warehouse: Warehouse, *, owns_warehouse: bool = False):
        self._warehouse = warehouse
        self._owns = owns_warehouse

    async def known_among(self, project_id: str, dedup_ids: Sequence[str], window_s: float) -> dict[str, str]:
        try:
            found = await written_among(self._warehouse, project_id, ((EVENT, d) for d in dedup_ids), window_s)
        except Exception as exc:
            raise ArchiveUnavailable(f"the dedup archive does not answer: {exc}") from exc
        return {dedup_id: status for (_, dedup_id), status in found.items()}

    async def written_since(self, project_id: str, since_ms: int) -> list[str]:
        params = {"project_id": project_id, "kind": EVENT, "since_ms": since_ms}
        try:
            rows = await self._warehouse.query(WRITTEN_SINCE, params)
        except Exception as exc:
            raise ArchiveUnavailable(f"the dedup archive does not answer: {exc}") from exc
        return [row["dedup_id"] for row in rows]

    async def close(self) -> None:
        if self._owns:
            await self._warehouse.close()
