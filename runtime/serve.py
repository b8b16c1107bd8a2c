"""`rewards serve`: the embedded default, one process serving every endpoint and running the pipeline."""

import asyncio
import contextlib
import functools
import logging
import os
import socket
import sys

import structlog
import uvicorn
from fastapi import FastAPI

from ingest_api.app import ROUTERS as INGEST_ROUTERS
from query_api.app import ROUTERS as QUERY_ROUTERS
from rewards.adapters import warehouse_erasure
from rewards.logging import configure_logging
from rewards.settings import Settings
from rewards.web.app import create_app
from rewards.web.protocol import ContractHttpProtocol
from runtime.backups import serve_requests
from runtime.data_dir import lock_data_dir
from runtime.wiring import claim_expiry_sweeps, embedded_dispatcher, open_embedded, stop
from stream_workers.app import running_worker
from stream_workers.erasures import run_erasures
from stream_workers.webhooks.dispatcher import running_dispatcher

log = structlog.get_logger(__name__)


def embedded_app(settings: Settings) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        backends = await open_embedded(settings)
        app.state.backends = backends
        paused = asyncio.Lock()  # held by a backup or an erasure: the worker's writes wait
        sweeps = backups = erasures = None
        try:
            async with (
                running_worker(backends.source, backends.state, backends.warehouse, settings, paused),
                running_dispatcher(embedded_dispatcher(backends)),
            ):
                sweeps = claim_expiry_sweeps(backends)
                backups = asyncio.create_task(serve_requests(backends.warehouse, settings.data_dir, paused))
                erase_warehouse = functools.partial(warehouse_erasure.erase_users, backends.warehouse)
                gap_s = 5.0 if settings.erasure_round_gap_s is None else settings.erasure_round_gap_s
                erasures = asyncio.create_task(
                    run_erasures(backends.state, erase_warehouse, lambda: paused, asyncio.Event(), gap_s=gap_s)
                )
                log.info("serving", data_dir=str(settings.data_dir.resolve()), port=settings.port)
                yield
                await stop(erasures)
                await stop(backups)
                await stop(sweeps)
        finally:
            await stop(erasures)
            await stop(backups)
            await stop(sweeps)
            await backends.close()
            log.info("stopped")

    return create_app(
        "Rewards", INGEST_ROUTERS + QUERY_ROUTERS, lifespan, settings.max_body_bytes, settings.cors_origins
    )


class _Server(uvicorn.Server):
    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if sockets and self.started:  # uvicorn says where it listens only on sockets it bound itself
            host, port = sockets[0].getsockname()[:2]
            host = f"[{host}]" if ":" in host else host
            message = "Uvicorn running on http://%s:%d (Press CTRL+C to quit)"
            logging.getLogger("uvicorn.error").info(message, host, port)


class CannotListen(RuntimeError):
    pass


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound before anything starts: uvicorn binds only after the app's start-up, so a busy port
    would otherwise be found once every migration has run and "serving" was logged."""
    host = host.removeprefix("[").removesuffix("]")  # an IPv6 address as written in a URL
    try:
        family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        return socket.create_server((host, port), family=family, backlog=2048)
    except socket.gaierror as exc:
        raise CannotListen(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    except (OSError, OverflowError) as exc:  # OverflowError: a port outside 0-65535
        reason = os.strerror(exc.errno) if getattr(exc, "errno", None) else str(exc)
        raise CannotListen(f"cannot listen on {host}:{port}: {reason}") from None


def serve(settings: Settings) -> None:
    configure_logging(settings.log_level, settings.log_format)
    lock = lock_data_dir(settings.data_dir)  # noqa: F841  # kept until the process exits
    sock = listening_socket(settings.host, settings.port)
    config = uvicorn.Config(
        embedded_app(settings), log_config=None, access_log=False, timeout_graceful_shutdown=10,
        http=ContractHttpProtocol,
    )  # fmt: skip
    server = _Server(config)
    server.run(sockets=[sock])
    if not server.started:
        sys.exit(3)  # as uvicorn.run: the app's start-up failed
