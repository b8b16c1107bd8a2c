"""`rewards webhooks`: the production shape's webhook dispatcher (stream_workers.webhooks.dispatcher) as a process of
its own: the events topic read by its own consumer group, deliveries queued in Redis, sent to customers' URLs. Scaled
by adding processes (they share the topic's partitions and lease deliveries from the one queue). Runs until SIGTERM
or SIGINT, then lets attempts in flight finish (each bounded by the sender's timeout)."""

import asyncio
import signal

import structlog

from rewards.settings import Settings
from runtime.wiring import open_webhook_dispatcher

log = structlog.get_logger(__name__)


async def run_webhooks(settings: Settings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with open_webhook_dispatcher(settings) as dispatcher:
        await dispatcher.run(stop)


def main(settings: Settings) -> None:
    from rewards.logging import configure_logging

    settings.require_engines()
    configure_logging(settings.log_level, settings.log_format)
    if settings.webhooks_metrics_port:
        from prometheus_client import start_http_server

        start_http_server(settings.webhooks_metrics_port)
    asyncio.run(run_webhooks(settings))
