"""The adapters a process runs with, chosen once at start-up and shared by every request."""

from dataclasses import dataclass
from pathlib import Path

from rewards.backpressure import Backpressure
from rewards.ports import EventLog, EventSource, StateStore, Warehouse
from rewards.ratelimit import RateLimiter
from rewards.settings import Settings


@dataclass
class Backends:
    settings: Settings
    state: StateStore
    log: EventLog | None  # None in processes that never publish (the query API)
    source: EventSource | None
    warehouse: Warehouse | None
    limiter: RateLimiter
    backpressure: Backpressure | None = None  # in processes that accept events

    async def close(self) -> None:
        close_log = getattr(self.log, "close", None)  # the embedded outbox closes with the state store
        if close_log is not None:
            await close_log()
        if self.backpressure is not None:
            await self.backpressure.close()
        if self.warehouse is not None:
            await self.warehouse.close()
        await self.limiter.close()
        await self.state.close()


def state_path(data_dir: Path) -> Path:
    return data_dir / "state.sqlite3"


def open_embedded_state(data_dir: Path):
    """The state store alone: what the CLI needs, safe beside a running `rewards serve`."""
    from rewards.embedded.sqlite_db import SqliteDatabase
    from rewards.embedded.sqlite_state import SqliteStateStore

    return SqliteStateStore(SqliteDatabase(state_path(data_dir)))


async def open_embedded(settings: Settings) -> Backends:
    from rewards.embedded.chdb_warehouse import ChdbWarehouse
    from rewards.embedded.sqlite_db import SqliteDatabase
    from rewards.embedded.sqlite_outbox import SqliteOutbox
    from rewards.embedded.sqlite_state import SqliteStateStore

    db = SqliteDatabase(state_path(settings.data_dir))
    outbox = SqliteOutbox(db)
    warehouse = ChdbWarehouse(settings.data_dir / "warehouse")
    await warehouse.migrate()
    return Backends(
        settings=settings,
        state=SqliteStateStore(db, settings.dedup_window, settings.idempotency_ttl),
        log=outbox,
        source=outbox,
        warehouse=warehouse,
        limiter=RateLimiter(settings.rate_limits),
        backpressure=Backpressure(outbox, settings.max_backlog),
    )
