"""The project's dead letters listed and replayed (rewards.domain.dead_letters). Knows nothing of HTTP.

A replay publishes each replayable record again, `replay` set to its dead letter's id, on the partition its kind
goes to (a conversion: its user's shard); the workers write it once under that id, so a replay run twice, or cut short
and run again, writes each record once. Replays go a bounded slice at a time, in the listing's order: the answer's
`next` is where the next call starts.
"""

import base64
from collections import defaultdict
from dataclasses import dataclass

import orjson

from rewards.domain.dead_letters import dead_letter_id, replay_of
from rewards.ports import EventLog, Warehouse
from schemas.clickhouse.values import DT, ch_datetime, time_window
from schemas.records import ConversionRecord, dump_records
from schemas.topics import shard_of

REPLAY_SLICE = 1_000  # dead letters replayed a call
RECORDS_PER_MESSAGE = 100


@dataclass(frozen=True)
class Filters:
    record_type: str | None = None
    reason: str | None = None  # a part of the reason, any case
    start_ms: int | None = None  # failed at, inclusive
    end_ms: int | None = None  # exclusive


def _where(project_id: str, filters: Filters) -> tuple[str, dict]:
    conditions = ["project_id = {project:String}"]
    params: dict = {"project": project_id}
    if filters.record_type is not None:
        conditions.append("record_type = {record_type:String}")
        params["record_type"] = filters.record_type
    if filters.reason is not None:
        conditions.append("positionCaseInsensitiveUTF8(reason, {reason:String}) > 0")
        params["reason"] = filters.reason
    conditions += time_window("failed_at", filters.start_ms, filters.end_ms, params)
    return " AND ".join(conditions), params


_COLUMNS = "record_type, source_id, reason, delivery, toUnixTimestamp64Milli(failed_at) AS failed_ms"
_ORDER = "ORDER BY failed_at, source_id, delivery"


async def listing(
    warehouse: Warehouse, project_id: str, filters: Filters, offset: int, limit: int
) -> tuple[list[dict], int]:
    """A page of the dead letters, oldest first, and how many match."""
    where, params = _where(project_id, filters)
    total = await warehouse.query(f"SELECT count() AS n FROM dead_letters WHERE {where}", params)
    rows = await warehouse.query(
        f"SELECT {_COLUMNS}, payload FROM dead_letters WHERE {where} {_ORDER} LIMIT {{limit:UInt32}} "
        "OFFSET {offset:UInt64}",
        {**params, "limit": limit, "offset": offset},
    )
    return rows, int(total[0]["n"])


def row_id(row: dict) -> str:
    return dead_letter_id(row["delivery"], row["record_type"], row["source_id"])


@dataclass(frozen=True)
class Replayed:
    replayed: int
    not_replayable: dict[str, int]  # why → how many
    next: str | None  # where the next slice starts; None: none left


async def replay(
    warehouse: Warehouse, log: EventLog, project_id: str, filters: Filters, after: str | None, now_ms: int,
    window_ms: int,
) -> Replayed:  # fmt: skip
    """Replay a slice of the matching dead letters that follow `after` (a `next` of an earlier answer)."""
    where, params = _where(project_id, filters)
    if after is not None:
        failed_ms, source_id, delivery = _cursor_of(after)
        where += f" AND (failed_at, source_id, delivery) > ({{after_t:{DT}}}, {{after_s:String}}, {{after_d:String}})"
        params.update(after_t=ch_datetime(failed_ms), after_s=source_id, after_d=delivery)
    rows = await warehouse.query(
        f"SELECT {_COLUMNS}, payload FROM dead_letters WHERE {where} {_ORDER} LIMIT {{limit:UInt32}}",
        {**params, "limit": REPLAY_SLICE},
    )
    records, refused = [], defaultdict(int)
    for row in rows:
        replay_ = replay_of(row_id(row), row["record_type"], row["payload"], int(row["failed_ms"]), now_ms, window_ms)
        if replay_.record is None:
            refused[replay_.why] += 1
        else:
            records.append(replay_.record)
    await _publish(log, project_id, records)
    last = rows[-1] if len(rows) == REPLAY_SLICE else None
    return Replayed(len(records), dict(refused), None if last is None else _cursor(last))


async def _publish(log: EventLog, project_id: str, records: list) -> None:
    """A conversion on its user's shard (its user's order), every other record on the project's partition."""
    by_shard: dict[int, list] = defaultdict(list)
    for record in records:
        shard = 0
        if isinstance(record, ConversionRecord) and log.shards > 1:
            shard = shard_of(project_id, record.user_identifier_type, record.user_identifier, log.shards)
        by_shard[shard].append(record)
    for start in range(0, max(map(len, by_shard.values()), default=0), RECORDS_PER_MESSAGE):
        part = {shard: dump_records(rs[start : start + RECORDS_PER_MESSAGE]) for shard, rs in by_shard.items()
                if rs[start : start + RECORDS_PER_MESSAGE]}  # fmt: skip
        if set(part) == {0}:
            await log.publish(project_id, part[0])
        else:
            await log.publish_shards(project_id, part)


def _cursor(row: dict) -> str:
    raw = orjson.dumps([int(row["failed_ms"]), row["source_id"], row["delivery"]])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class BadCursor(ValueError):
    pass


def _cursor_of(text: str) -> tuple[int, str, str]:
    try:
        failed_ms, source_id, delivery = orjson.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if not (isinstance(failed_ms, int) and isinstance(source_id, str) and isinstance(delivery, str)):
            raise TypeError
    except (ValueError, TypeError) as exc:
        raise BadCursor("after is not a `next` of an earlier answer") from exc
    return failed_ms, source_id, delivery
