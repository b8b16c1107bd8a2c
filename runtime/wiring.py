"""The composition root: which adapter serves each port, picked from the scheme of its engine's URL.

Every process opens its engines here and nowhere else: `rewards serve` (the embedded shape), the production
services and workers, and the command line. A shape is three URLs (EngineUrls):

    state      sqlite:///DIR/state.sqlite3          redis://HOST:6379/0, rediss://…   (REDIS_URL)
    log        outbox:  (the state's own SQLite)    kafka://HOST:9092,HOST:9092       (KAFKA_BOOTSTRAP_SERVERS)
    warehouse  chdb:///DIR/warehouse                 http(s)://HOST:8123/DB            (CLICKHOUSE_URL)

A new adapter of a port is its module plus one branch of the opener of that port below.
"""

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from rewards.adapters import warehouse_erasure
from rewards.adapters.affiliate_figures import WarehouseAffiliateFigures
from rewards.adapters.code_figures import WarehouseCodeFigures
from rewards.adapters.code_traffic import WarehouseCodeTraffic
from rewards.adapters.webhook_sender import GuardedSender
from rewards.ports import DedupArchive, EventLog, PlanStore, StateStore, Warehouse
from rewards.settings import Settings
from rewards.web.backends import Backends
from rewards.web.backpressure import Backpressure
from rewards.web.ratelimit import RateLimiter

if TYPE_CHECKING:  # the workers' faust app is imported by the worker processes alone
    from stream_workers.faust_app import Resources, WorkerOptions
    from stream_workers.webhooks.dispatcher import Dispatcher
    from stream_workers.webhooks.dispatcher import Settings as DispatcherSettings

REDIS_SCHEMES = ("redis", "rediss", "unix")
CLICKHOUSE_SCHEMES = ("http", "https", "clickhouse", "clickhouses")


class UnknownEngine(ValueError):
    pass


@dataclass(frozen=True)
class EngineUrls:
    state: str
    log: str
    warehouse: str

    @property
    def embedded_state(self) -> bool:
        return _scheme(self.state) == "sqlite"


def embedded_urls(data_dir: Path) -> EngineUrls:
    """The embedded shape's engines, all in `data_dir`: what `rewards serve` runs on."""
    return EngineUrls(f"sqlite:///{state_path(data_dir)}", "outbox:", f"chdb:///{data_dir / 'warehouse'}")


def production_urls(settings: Settings) -> EngineUrls:
    """The production shape's engines, from the environment (all three are required)."""
    settings.require_engines()
    return EngineUrls(settings.redis_url, f"kafka://{settings.kafka_bootstrap_servers}", settings.clickhouse_url)


def state_path(data_dir: Path) -> Path:
    return data_dir / "state.sqlite3"


def _scheme(url: str) -> str:
    return urlsplit(url).scheme


def _path(url: str) -> Path:
    """The path of a `sqlite:///…` or `chdb:///…` URL (three slashes: relative, four: absolute, as SQLAlchemy's)."""
    return Path(url.split(":///", 1)[1]) if ":///" in url else Path(urlsplit(url).path)


# -- one opener per port ------------------------------------------------------------------------------


async def open_state(url: str, settings: Settings, archive: DedupArchive | None = None) -> StateStore:
    """`archive`: where a store that keeps a short hot window of dedup ids (Redis) asks past it."""
    scheme = _scheme(url)
    if scheme == "sqlite":
        from rewards.adapters.embedded.sqlite_db import SqliteDatabase
        from rewards.adapters.embedded.sqlite_state import SqliteStateStore

        return SqliteStateStore(SqliteDatabase(_path(url)), settings.dedup_window, settings.idempotency_ttl)
    if scheme in REDIS_SCHEMES:
        from rewards.adapters.production.redis_state import open_redis_state

        return await open_redis_state(url, settings, archive)
    raise UnknownEngine(f"no state store for {scheme!r} URLs (sqlite:, redis:, rediss:, unix:)")


async def open_warehouse(url: str, settings: Settings, *, with_nodes: bool = False) -> Warehouse:
    """`with_nodes`: on a ClickHouse cluster (REWARDS_CLICKHOUSE_CLUSTER), with a connection to each of its nodes
    too, as `rewards migrate` needs; every other process reads and writes through one node."""
    scheme = _scheme(url)
    if scheme == "chdb":
        from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse

        return ChdbWarehouse(_path(url))
    if scheme in CLICKHOUSE_SCHEMES:
        from rewards.adapters.production.clickhouse_warehouse import ClickHouseWarehouse

        if with_nodes:
            return await ClickHouseWarehouse.open(settings)
        return await ClickHouseWarehouse.connect(url, async_insert_ms=settings.clickhouse_async_insert_ms)
    raise UnknownEngine(f"no warehouse for {scheme!r} URLs (chdb:, http:, https:)")


async def open_log(url: str, settings: Settings, state: StateStore) -> tuple[EventLog, Backpressure]:
    """The log the process publishes to, and the back-pressure measured on its backlog."""
    scheme = _scheme(url)
    if scheme == "outbox":
        from rewards.adapters.embedded.sqlite_outbox import SqliteOutbox

        outbox = SqliteOutbox(state.database)  # the state's own SQLite: a change and its publish are one transaction
        return outbox, Backpressure(outbox, settings.max_backlog)
    if scheme == "kafka":
        from rewards.adapters.production.kafka_lag import KafkaLag
        from rewards.adapters.production.kafka_log import KafkaEventLog

        servers = url.removeprefix("kafka://")
        log = await KafkaEventLog.start(servers, settings.producer_pool_size, shards=settings.conversion_shards)
        try:
            lag = await KafkaLag.start(servers, settings.worker_group_id)
        except BaseException:
            await log.close()
            raise
        if hasattr(state, "take_over_owner") and (previous := await state.take_over_owner(log.owner)):
            _background(retire_predecessor(state, lag, previous))
        return log, Backpressure(lag, settings.max_backlog, owns_source=True)
    raise UnknownEngine(f"no event log for {scheme!r} URLs (outbox:, kafka:)")


RETIRE_WAIT_S = 10.0  # for the workers to write what a dead predecessor published, at most
RETIRE_POLL_S = 0.2
_retiring: set[asyncio.Task] = set()


async def retire_predecessor(state, lag, epoch: str) -> None:
    """The ingest process that held this one's Kafka transactional ids before it (epoch `epoch`) is dead, and its
    open transactions were aborted when this one's producers started (fenced): its claims left pending may be taken
    over (rewards.adapters.production.redis_state.ingest). First wait, a little, for the workers to write what it
    had published (then a retry of its batch finds those events duplicates); past RETIRE_WAIT_S retire it all the
    same: a record published twice is written once (stream_workers.written), so a take-over never counts twice."""
    import structlog

    log = structlog.get_logger(__name__)
    deadline = asyncio.get_running_loop().time() + RETIRE_WAIT_S
    try:
        ends = await lag.ends()
        while asyncio.get_running_loop().time() < deadline and not await lag.written_up_to(ends):
            await asyncio.sleep(RETIRE_POLL_S)
    except Exception as exc:  # the wait is a courtesy: retire anyway
        log.warning("waiting for the workers before retiring the dead ingest process failed", error=repr(exc))
    await state.retire_epoch(epoch)
    log.info("the dead ingest process's pending claims may be taken over", epoch=epoch)


def _background(coroutine) -> None:
    task = asyncio.create_task(coroutine)
    _retiring.add(task)
    task.add_done_callback(_retiring.discard)


async def open_limiter(state_url: str, settings: Settings) -> RateLimiter:
    """The rate limits' windows: in the process beside an embedded store, in Redis (shared by every process) beside
    Redis's. No automatic retries in Redis: a call counted twice would be a call too many."""
    if _scheme(state_url) not in REDIS_SCHEMES:
        return RateLimiter(settings.rate_limits)
    from rewards.adapters.production.redis_client import open_redis

    redis = await open_redis(state_url, settings, decode_responses=True, retry=Retry(NoBackoff(), 0))
    return RateLimiter(settings.rate_limits, redis=redis)


def dedup_archive(state_url: str, warehouse: Warehouse) -> DedupArchive | None:
    """Redis keeps exact dedup ids for the hot window; past it, the warehouse's `dedup_ids` answers. The embedded
    store keeps its whole window itself."""
    if _scheme(state_url) not in REDIS_SCHEMES:
        return None
    from rewards.adapters.dedup_archive import WarehouseDedupArchive
    from rewards.adapters.production.grouped_archive import GroupedArchive

    return GroupedArchive(WarehouseDedupArchive(warehouse))


# -- what each process runs on ------------------------------------------------------------------------


async def open_backends(settings: Settings, urls: EngineUrls, *, publishes: bool, consumes: bool = False) -> Backends:
    """Every port an HTTP process uses. `publishes`: it changes state (the event log and back-pressure);
    `consumes`: it also runs the workers in-process (the embedded outbox is their source)."""
    async with AsyncExitStack() as opened:  # what was opened is closed again if a later engine does not answer
        warehouse = await open_warehouse(urls.warehouse, settings)
        opened.push_async_callback(warehouse.close)
        if _scheme(urls.warehouse) == "chdb":
            await warehouse.migrate()  # the process's own embedded warehouse (a server's: `rewards migrate`)
        state = await open_state(urls.state, settings, dedup_archive(urls.state, warehouse))
        opened.push_async_callback(state.close)
        log, backpressure = None, None
        if publishes:
            log, backpressure = await open_log(urls.log, settings, state)
            opened.push_async_callback(backpressure.close)
            if hasattr(log, "close"):  # the embedded outbox closes with the state store
                opened.push_async_callback(log.close)
        limiter = await open_limiter(urls.state, settings)
        opened.pop_all()  # all open: Backends.close closes them from now on
    source = log if consumes else None
    figures = WarehouseAffiliateFigures(warehouse)
    traffic = WarehouseCodeTraffic(warehouse)
    backends = Backends(settings, state, log, source, warehouse, limiter, backpressure, figures, traffic)
    backends.code_figures = WarehouseCodeFigures(warehouse)
    backends.webhook_sender = GuardedSender(settings.webhooks_allow_private)
    return backends


async def open_embedded(settings: Settings) -> Backends:
    """`rewards serve`: every port on the engines of REWARDS_DATA_DIR, the workers in the same process."""
    return await open_backends(settings, embedded_urls(settings.data_dir), publishes=True, consumes=True)


async def open_production(settings: Settings, *, publishes: bool) -> Backends:
    """A production HTTP service: the ingest edge (`publishes`) or the query API."""
    return await open_backends(settings, production_urls(settings), publishes=publishes)


def open_embedded_state(data_dir: Path) -> StateStore:
    """The embedded state store alone (synchronous): what the command line needs, safe beside a running server."""
    from rewards.adapters.embedded.sqlite_db import SqliteDatabase
    from rewards.adapters.embedded.sqlite_state import SqliteStateStore

    return SqliteStateStore(SqliteDatabase(state_path(data_dir)))


# -- the production workers ---------------------------------------------------------------------------


async def open_worker_resources(settings: Settings, options: "WorkerOptions") -> "Resources":
    """What a production worker process (stream_workers.faust_app) runs on."""
    from rewards.adapters.production.kafka_dead_letters import KafkaDeadLetters
    from rewards.adapters.production.kafka_positions import KafkaPositions
    from stream_workers.faust_app import Resources

    warehouse = await open_warehouse(settings.clickhouse_url, settings)
    try:
        state, plans = await _open_worker_state(settings, options, warehouse)
    except BaseException:
        await warehouse.close()
        raise
    resources = Resources(state, warehouse, plans, window_s=settings.dedup_window)
    try:
        resources.log_id = await kafka_cluster_id(settings.kafka_bootstrap_servers)
        resources.dead_letters = await KafkaDeadLetters.start(settings.kafka_bootstrap_servers)
        resources.positions = await KafkaPositions.start(settings.kafka_bootstrap_servers, settings.worker_group_id)
        if options.state != "sqlite":  # erasures hold the writers of every worker process through Redis
            from rewards.adapters.production.writer_hold import RedisWriterHold

            resources.hold = RedisWriterHold(state.redis, int(settings.worker_lease_s * 1000))
            resources.caught_up = _log_written(settings)
            resources.erase_warehouse = functools.partial(warehouse_erasure.erase_users, warehouse)
            if settings.erasure_round_gap_s is not None:
                resources.erasure_gap_s = settings.erasure_round_gap_s
    except BaseException:
        await resources.close()
        raise
    return resources


ERASURE_WAIT_S = 600.0  # an erasure round waits this long at most for the workers to write what the log holds


def _log_written(settings: Settings) -> Callable[[], Awaitable[None]]:
    """What an erasure round waits for first: every record on the event log when it starts written by the workers
    (so none of them writes an erased identifier after the round)."""
    from rewards.adapters.production.kafka_lag import KafkaLag

    async def caught_up() -> None:
        await asyncio.sleep(settings.erasure_publish_grace_s)
        lag = await KafkaLag.start(settings.kafka_bootstrap_servers, settings.worker_group_id)
        try:
            ends = await lag.ends()
            async with asyncio.timeout(ERASURE_WAIT_S):
                while not await lag.written_up_to(ends):
                    await asyncio.sleep(0.5)
        finally:
            await lag.close()

    return caught_up


async def kafka_cluster_id(bootstrap_servers: str) -> str:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        return (await admin.describe_cluster())["cluster_id"]
    finally:
        await admin.close()


async def _open_worker_state(
    settings: Settings, options: "WorkerOptions", warehouse: Warehouse
) -> tuple[StateStore, PlanStore]:
    from rewards.adapters.embedded.sqlite_plans import SqlitePlans
    from rewards.adapters.warehouse_plans import WarehousePlans

    if options.state == "sqlite":
        return open_embedded_state(settings.data_dir), SqlitePlans(settings.data_dir / "worker_plans.sqlite3")
    return await open_state(settings.redis_url, settings), WarehousePlans(warehouse)


# -- the webhook dispatcher ---------------------------------------------------------------------------


def embedded_dispatcher(backends: Backends) -> "Dispatcher":
    """`rewards serve`'s dispatcher: the outbox's webhook feed (what the in-process worker wrote), the same engines."""
    from rewards.adapters.embedded.sqlite_outbox import SqliteWebhookFeed
    from stream_workers.webhooks.dispatcher import Dispatcher

    feed = SqliteWebhookFeed(backends.state.database, backends.log.fed)
    return Dispatcher(feed, backends.state, backends.warehouse, backends.webhook_sender,
                      _dispatcher_settings(backends.settings))  # fmt: skip


@contextlib.asynccontextmanager
async def open_webhook_dispatcher(settings: Settings):
    """`rewards webhooks`: the production dispatcher on Kafka (its own group), Redis and ClickHouse."""
    from rewards.adapters.production.kafka_webhook_feed import KafkaWebhookFeed
    from stream_workers.webhooks.dispatcher import Dispatcher

    async with AsyncExitStack() as opened:
        warehouse = await open_warehouse(settings.clickhouse_url, settings)
        opened.push_async_callback(warehouse.close)
        state = await open_state(settings.redis_url, settings)
        opened.push_async_callback(state.close)
        feed = await KafkaWebhookFeed.start(
            settings.kafka_bootstrap_servers, settings.webhooks_group_id, settings.worker_group_id
        )
        opened.push_async_callback(feed.close)
        sender = GuardedSender(settings.webhooks_allow_private)
        opened.push_async_callback(sender.close)
        yield Dispatcher(feed, state, warehouse, sender, _dispatcher_settings(settings))


def _dispatcher_settings(settings: Settings) -> "DispatcherSettings":
    from stream_workers.webhooks.dispatcher import Settings as DispatcherSettings

    return DispatcherSettings(
        poll_timeout_s=settings.worker_poll_s, secrets_keys=settings.secrets_keys,
        lease_ms=int(settings.webhooks_lease_s * 1000),
    )  # fmt: skip


def claim_expiry_sweeps(backends: Backends) -> asyncio.Task:
    """The claim check expiry sweep (ingest_api.claim_checks.expiry), as a task of the process serving the edge."""
    from ingest_api.claim_checks.expiry import run_sweeps

    every_s = backends.settings.claim_expiry_sweep_s
    return asyncio.create_task(run_sweeps(backends.state, backends.log, backends.warehouse, every_s))


async def stop(task: asyncio.Task | None) -> None:
    """Cancel a background task and wait for it (nothing to do for None or one already done)."""
    if task is None or task.done():
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
