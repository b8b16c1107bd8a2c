"""Moving an embedded data dir into the production engines (`rewards move-to-production`, docs/operations.md "Moving
to production"): the warehouse (runtime.moving.warehouse) and the state store (runtime.moving.state) copied, while no
`rewards serve` runs on the data dir, into a ClickHouse server and a Redis the production shape then runs on.

The embedded log is not copied: a move starts from a drained data dir (every accepted event written, every webhook
message taken), so Kafka starts with an empty topic and nothing is published twice. Every check runs before anything
is written: the data dir drained; the events topic empty; one ClickHouse server whose tables are the embedded ones
(engines, migration) and empty; the secrets openable by production's key; the Redis holding none of the data dir's
projects or API keys.
"""

import contextlib
from collections.abc import Callable
from pathlib import Path

from redis.backoff import NoBackoff
from redis.retry import Retry

from rewards.settings import Settings
from runtime.moving.refusals import MoveRefused

__all__ = ["MoveRefused", "move_to_production"]

Progress = Callable[[str, str, int], None]  # (part, table, rows copied)


async def move_to_production(data_dir: Path, settings: Settings, progress: Progress | None = None) -> dict:
    """Copy `data_dir`'s warehouse and state into CLICKHOUSE_URL's server and REDIS_URL's Redis; {part: {table:
    rows}}. The caller holds the data dir (runtime.data_dir.lock_data_dir)."""
    from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse
    from rewards.adapters.production.redis_client import open_redis
    from runtime.moving import state, warehouse
    from runtime.wiring import open_warehouse, state_path

    if not (settings.kafka_bootstrap_servers and settings.clickhouse_url and settings.redis_url):
        raise MoveRefused("set KAFKA_BOOTSTRAP_SERVERS, CLICKHOUSE_URL and REDIS_URL to the production engines the "
                          "data dir moves into")  # fmt: skip
    if settings.clickhouse_cluster:
        raise MoveRefused("moving into a sharded warehouse (REWARDS_CLICKHOUSE_CLUSTER) is not supported: move into "
                          "one ClickHouse server")  # fmt: skip
    await check_drained(state_path(data_dir))
    await check_topic(settings)
    async with contextlib.AsyncExitStack() as opened:
        source = ChdbWarehouse(data_dir / "warehouse")
        opened.push_async_callback(source.close)
        target = await open_warehouse(settings.clickhouse_url, settings)
        opened.push_async_callback(target.close)
        # No automatic retries (as the production store): a pipeline sent again after a lost reply could add twice.
        redis = await open_redis(settings.redis_url, settings, decode_responses=True, retry=Retry(NoBackoff(), 0))
        opened.push_async_callback(redis.aclose)
        await source.migrate()  # an embedded warehouse of an older release is brought forward, as serve would
        tables = await warehouse.check(source, target)
        await state.check(state_path(data_dir), redis, settings)
        told = _part(progress, "warehouse")
        moved = {"warehouse": await warehouse.copy_tables(source, target, tables, data_dir / "moving", told)}
        moved["state"] = await state.copy_tables(state_path(data_dir), redis, settings, _part(progress, "state"))
        return moved


async def check_topic(settings: Settings) -> None:
    """Refuse an events topic that holds anything: the workers would write it into the moved warehouse."""
    from rewards.adapters.production.kafka_lag import KafkaLag

    lag = await KafkaLag.start(settings.kafka_bootstrap_servers, settings.worker_group_id)
    try:
        ends = await lag.ends()
    finally:
        await lag.close()
    if not ends:
        raise MoveRefused("the events topic is missing: run `rewards migrate` with the production engines set first")
    if any(ends.values()):
        raise MoveRefused(f"the events topic already holds {sum(ends.values())} records: move into a new topic (delete "
                          "it and run `rewards migrate` again)")  # fmt: skip


def _part(progress: Progress | None, part: str):
    return None if progress is None else lambda table, rows: progress(part, table, rows)


async def check_drained(state_file: Path) -> None:
    """Refuse a data dir whose log still holds messages: events accepted but not yet written, or messages the webhook
    dispatcher has not yet taken."""
    if not state_file.exists():
        raise MoveRefused(f"no embedded data at {state_file.parent}: pass the folder `rewards serve` uses")
    from runtime.moving.state import LOG_TABLES, open_source

    with contextlib.closing(await open_source(state_file)) as source:  # (a data dir of an older release: upgraded)
        waiting = {table: source.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in LOG_TABLES}
    if any(waiting.values()):
        raise MoveRefused(
            f"the data dir's log is not drained (messages not yet written: {waiting['outbox']}; not yet taken by the "
            f"webhook dispatcher: {waiting['webhook_feed']}): start `rewards serve` on it with no producer sending, "
            "wait until its console's health page shows a backlog of 0, stop it, and move again"
        )
