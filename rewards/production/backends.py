"""The production shape's adapters: Redis, Kafka and a ClickHouse server, chosen by environment."""

from rewards.backends import Backends
from rewards.backpressure import Backpressure
from rewards.ratelimit import RateLimiter
from rewards.settings import Settings


def limits_storage_uri(redis_url: str) -> str:
    """The `limits` library's URI for the same Redis: every process then shares the same windows."""
    return "async+" + redis_url


async def open_production(settings: Settings, *, publishes: bool, reads_warehouse: bool) -> Backends:
    from rewards.dedup_archive import WarehouseDedupArchive
    from rewards.production.clickhouse_warehouse import ClickHouseWarehouse
    from rewards.production.kafka_lag import KafkaLag
    from rewards.production.kafka_log import KafkaEventLog
    from rewards.production.redis_state import open_redis_state

    settings.require_engines()
    warehouse = await ClickHouseWarehouse.connect(settings.clickhouse_url) if reads_warehouse else None
    # Redis keeps exact dedup ids for the hot window; past it, the warehouse's dedup_ids answers.
    archive = WarehouseDedupArchive(warehouse) if warehouse is not None else None
    state = await open_redis_state(settings.redis_url, settings, archive)
    log, backpressure = None, None
    if publishes:
        log = await KafkaEventLog.start(settings.kafka_bootstrap_servers, settings.producer_pool_size)
        lag = await KafkaLag.start(settings.kafka_bootstrap_servers, settings.worker_group_id)
        backpressure = Backpressure(lag, settings.max_backlog, owns_source=True)
    # redis-py, the client the state store uses too (limits defaults to coredis for async Redis).
    limiter = RateLimiter(
        settings.rate_limits, storage_uri=limits_storage_uri(settings.redis_url), implementation="redispy"
    )
    return Backends(
        settings=settings,
        state=state,
        log=log,
        source=None,
        warehouse=warehouse,
        limiter=limiter,
        backpressure=backpressure,
    )
