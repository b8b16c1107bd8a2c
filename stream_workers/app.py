"""The workers as a task beside another process's event loop (the embedded default)."""

import asyncio
import contextlib

from rewards.ports import EventSource, StateStore, Warehouse
from rewards.settings import Settings
from stream_workers.runner import run_worker


@contextlib.asynccontextmanager
async def running_worker(
    source: EventSource, state: StateStore, warehouse: Warehouse, settings: Settings, paused: asyncio.Lock | None = None
):
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_worker(
            source,
            state,
            warehouse,
            stop,
            settings.worker_poll_s,
            settings.dedup_window,
            paused,
        )
    )
    try:
        yield task
    finally:
        stop.set()
        await task
