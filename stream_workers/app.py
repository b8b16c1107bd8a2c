"""The workers as a task beside another process's event loop (the embedded default)."""

import asyncio
import contextlib

from rewards.backends import Backends
from stream_workers.runner import run_worker


@contextlib.asynccontextmanager
async def running_worker(backends: Backends):
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_worker(
            backends.source,
            backends.state,
            backends.warehouse,
            stop,
            backends.settings.worker_poll_s,
            backends.settings.dedup_window,
        )
    )
    try:
        yield task
    finally:
        stop.set()
        await task
