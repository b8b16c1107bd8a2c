"""The webhook dispatcher (issue 31, API.md §10): what one dispatcher process sends per second, and what its reader adds
per processed event, on the embedded shape (SQLite state store, chdb) and the production one (Redis, the ClickHouse
server), each beside a baseline of the same run.

- **Sending:** N deliveries of a `reward.earned` body (371 bytes) enqueued straight in the state store
  (`WebhookQueue.enqueue`) over ENDPOINTS endpoints of one project (`create_webhook`), then the dispatcher
  (`Dispatcher.run` with a feed that gives nothing: its sender, settler and housekeeping loops) runs in this process
  until every delivery is settled `succeeded`: deliveries/s (wall) and the process's CPU per delivery. The receiver
  is a process of its own (a bare asyncio protocol on uvloop answering every request 200 with an empty body); its CPU
  per request is reported beside it (1 / that is what it sustains: it must be far above the dispatcher's rate).
  - **Baseline:** the same N signed POSTs by the same sender (`GuardedSender.send`, its client kept as the
    dispatcher's) at the dispatcher's concurrency (PER_ENDPOINT in flight per endpoint, ENDPOINTS × PER_ENDPOINT in
    all), without the queue: the queue's cost is the ratio.
- **Reading:** the reader's path per event: the feed's decoding (`schemas.records.decode_message`) and
  `Dispatcher.enqueue` (each project's endpoints, the payouts read back from the warehouse, the deliveries built and
  enqueued) of deliveries the workers have just processed (bench/workers.py's deliveries, projects and
  `process_delivery` steps), one endpoint per project subscribed to every event type. Its CPU per event beside the
  workers' own CPU per event on the same deliveries (measured as bench/workers.py does), delivery by delivery in
  turn. CPU is the process's (`time.process_time`):
  embedded it counts chdb's and SQLite's work too, production not the ClickHouse server's nor Redis's.
"""

import asyncio
import contextlib
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict

import orjson
import psutil
from prometheus_client import REGISTRY

from bench import workers
from bench.context import Context
from bench.load import BATCH
from bench.report import Figure
from rewards.adapters.webhook_sender import GuardedSender
from rewards.domain import sealing
from rewards.domain import webhook_events as we
from rewards.domain.timestamps import now_ms
from rewards.domain.webhooks import EVENT_TYPES, Endpoint, new_secret
from schemas.records import decode_message
from stream_workers.runner import freeze_startup_objects
from stream_workers.webhooks.dispatcher import PER_ENDPOINT, Dispatcher

ENDPOINTS = 10
TARGET = 2_000  # deliveries/s per dispatcher process (issue 31)
HOUR_MS = 3_600_000
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
_ROW = {"currency": "point", "currency_name": "", "currency_chain_id": 0, "role": "end_user", "amount": "12.5",
        "recipient_identifier": "0x" + "ab" * 20, "recipient_identifier_type": "evm_address"}  # fmt: skip
BODY = orjson.dumps(we.reward_earned(_ROW, we.ACCEPTED, None, "purchase", "2026-11-30T10:00:00.000Z"))


def run(context: Context) -> list[Figure]:
    return asyncio.run(_run(context))


async def _run(context: Context) -> list[Figure]:
    figures = []
    with _receiver() as (url, receiver):
        for shape in ("embedded", "production"):
            figures += await _sending(shape, context, url, receiver)
            figures += await _reading(shape, context)
    return figures


# -- the receiver: a process of its own --------------------------------------------------------------------------------


class _Answer(asyncio.Protocol):
    """HTTP/1.1 requests answered 200 with an empty body, as fast as the bytes come (keep-alive, pipelining)."""

    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""

    def data_received(self, data: bytes):
        buffer = self.buffer + data
        while (end := buffer.find(b"\r\n\r\n")) >= 0:
            head = buffer[:end].lower()
            length = 0
            if (at := head.find(b"content-length:")) >= 0:
                line_end = head.find(b"\r\n", at)
                length = int(head[at + 15 : line_end if line_end >= 0 else None])
            if len(buffer) < end + 4 + length:
                break
            buffer = buffer[end + 4 + length :]
            self.transport.write(OK)
        self.buffer = buffer


def serve_receiver() -> None:
    """`python -c 'from bench.webhooks import serve_receiver; serve_receiver()'`: prints its port, serves until
    killed."""
    import uvloop

    async def serve():
        server = await asyncio.get_running_loop().create_server(_Answer, "127.0.0.1", 0, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    uvloop.run(serve())


@contextlib.contextmanager
def _receiver():
    code = "from bench.webhooks import serve_receiver; serve_receiver()"
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}", psutil.Process(process.pid)
    finally:
        process.terminate()
        process.wait(10)


def _cpu_of(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


# -- sending -----------------------------------------------------------------------------------------------------------


class _NoRecords:
    """An EventSource with nothing to read: the dispatcher's reader idles (until `stop`: a stop ends its wait)."""

    def __init__(self, stop: asyncio.Event | None = None):
        self._stop = stop or asyncio.Event()

    async def poll(self, max_deliveries: int, timeout_s: float) -> list:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout_s)
        return []

    async def commit(self, deliveries) -> None:
        pass


def _counted(outcome: str) -> float:
    return REGISTRY.get_sample_value("rewards_webhook_attempts_total", {"outcome": outcome}) or 0.0


async def _sending(shape: str, context: Context, url: str, receiver: psutil.Process) -> list[Figure]:
    total = context.size(10_000, 2_000, 40)
    async with workers._engines(shape, context) as (state, warehouse):
        project_id = await state.create_project(f"bench-webhooks-{uuid.uuid4().hex[:8]}")
        secrets, endpoints = {}, []
        for number in range(ENDPOINTS):
            secret = new_secret()
            endpoint = Endpoint(f"wh_bench{uuid.uuid4().hex[:16]}", f"{url}/hooks/{number}", EVENT_TYPES, None, True,
                                sealing.seal(secret.encode(), ()), now_ms() - HOUR_MS)  # fmt: skip
            await state.create_webhook(project_id, endpoint)
            endpoints.append(endpoint)
            secrets[endpoint.id] = secret
        by_id = {endpoint.id: endpoint for endpoint in endpoints}

        def deliveries(run: str, total: int) -> list[we.Delivery]:
            now = now_ms()
            return [
                we.new_delivery(project_id, endpoints[n % ENDPOINTS].id, "reward.earned", f"{run}-{n}", BODY, now)
                for n in range(total)
            ]

        def plain(sender):
            async def send(delivery: we.Delivery) -> bool:
                endpoint = by_id[delivery.endpoint_id]
                return (await sender.send(endpoint.url, secrets[endpoint.id], delivery.id, delivery.body)).ok

            return send

        sender = GuardedSender(allow_private=True)  # its client kept, as the dispatcher's
        warm = context.size(ENDPOINTS * PER_ENDPOINT * 2, ENDPOINTS * PER_ENDPOINT * 2, ENDPOINTS)
        freeze_startup_objects()
        await _without_queue(deliveries("warm", warm), plain(sender))
        base = await _timed(receiver, total, _without_queue(deliveries("plain", total), plain(sender)))
        queued = await _enqueue(state, deliveries("queued", total))
        fastest = await _timed(receiver, total, _dispatch(state, warehouse, sender, queued))
        await sender.close()

    concurrency = f"{PER_ENDPOINT} in flight per endpoint ({ENDPOINTS * PER_ENDPOINT} at once)"
    what = f"{total:,} deliveries over {ENDPOINTS} endpoints, {concurrency}, to a local receiver"
    same = "the same POSTs by the same sender, same concurrency, no queue"
    figures = [
        Figure("webhooks", f"dispatcher deliveries/s (wall), 1 process: {what}", shape, fastest["rate"],
               "deliveries/s", baseline_name=same, baseline=base["rate"], ratio=fastest["rate"] / base["rate"],
               ratio_note="of baseline", target=f"≥ {TARGET:,} deliveries/s", met=fastest["rate"] >= TARGET),
        Figure("webhooks", "dispatcher process CPU per delivery (enqueued → settled succeeded)", shape, fastest["us"],
               "µs/delivery", baseline_name=same, baseline=base["us"], ratio=fastest["us"] / base["us"],
               ratio_note="× baseline"),
    ]  # fmt: skip
    figures.append(
        Figure("webhooks", "receiver process: what it sustains (1 / its CPU per request), during the dispatcher's "
               "fastest run", shape, fastest["receiver"], "requests/s", baseline_name="the dispatcher's rate",
               baseline=fastest["rate"], ratio=fastest["receiver"] / fastest["rate"], ratio_note="× the dispatcher")
    )  # fmt: skip
    return figures


async def _timed(receiver: psutil.Process, total: int, work) -> dict:
    """Of awaiting `work` (`total` deliveries): deliveries/s (wall), this process's CPU µs per delivery, and what the
    receiver sustains (requests/s: 1 / its CPU per request meanwhile)."""
    wall, cpu, theirs = time.perf_counter(), time.process_time(), _cpu_of(receiver)
    await work
    wall, cpu, theirs = time.perf_counter() - wall, time.process_time() - cpu, _cpu_of(receiver) - theirs
    receiver = total / max(theirs, 0.01)  # (its CPU times count clock ticks)
    return {"total": total, "rate": total / wall, "us": cpu * 1e6 / total, "receiver": receiver}


async def _without_queue(deliveries: list[we.Delivery], send) -> None:
    """Each delivery POSTed once, PER_ENDPOINT at a time per endpoint (the dispatcher's concurrency)."""
    of = defaultdict(list)
    for delivery in deliveries:
        of[delivery.endpoint_id].append(delivery)

    async def lane(queue: list[we.Delivery]) -> None:
        while queue:
            assert await send(queue.pop()), "the receiver answers 200"

    await asyncio.gather(*(lane(queue) for queue in of.values() for _ in range(PER_ENDPOINT)))


async def _enqueue(state, deliveries: list[we.Delivery]) -> list[we.Delivery]:
    for start in range(0, len(deliveries), 1_000):
        assert await state.enqueue(deliveries[start : start + 1_000]) == len(deliveries[start : start + 1_000])
    return deliveries


async def _dispatch(state, warehouse, sender, deliveries: list[we.Delivery]) -> None:
    """The dispatcher on enqueued deliveries until every one settled succeeded."""
    succeeded, failed = _counted("succeeded"), _counted("failed")
    stop = asyncio.Event()
    dispatcher = Dispatcher(_NoRecords(stop), state, warehouse, sender)
    task = asyncio.create_task(dispatcher.run(stop))
    try:
        while _counted("succeeded") - succeeded < len(deliveries) or await state.pending_deliveries():
            assert _counted("failed") == failed, "no attempt fails"
            assert not task.done(), "the dispatcher runs"
            await asyncio.sleep(0.02)
    finally:
        stop.set()
        await task


# -- reading -----------------------------------------------------------------------------------------------------------


async def _reading(shape: str, context: Context) -> list[Figure]:
    deliveries = context.size(8, 3, 1)
    count = context.size(workers.messages_per_delivery(shape), workers.messages_per_delivery(shape), 5)
    events, run = count * BATCH, uuid.uuid4().hex[:8]
    async with workers._engines(shape, context) as (state, warehouse):
        projects = [
            await workers._project(state, p, False) for p in range(context.size(workers.PROJECTS, workers.PROJECTS, 1))
        ]
        for project in projects:
            await state.create_webhook(project.id, Endpoint(
                f"wh_bench{uuid.uuid4().hex[:16]}", "http://127.0.0.1:9/hooks", EVENT_TYPES, None, True,
                sealing.seal(new_secret().encode(), ()), now_ms() - HOUR_MS))  # fmt: skip
        dispatcher = Dispatcher(_NoRecords(), state, warehouse, GuardedSender(allow_private=True))

        def of(n: int) -> list:
            return projects if shape == "embedded" else [projects[n % len(projects)]]

        async def delivery(name: str, n: int) -> tuple[float, float, int]:
            messages, accepted = workers._messages(of(n), f"{run}-{name}", count)
            await workers._accept(state, accepted)
            started = time.process_time()
            await workers._delivery(state, warehouse, messages, f"bench:{run}:{name}", workers._Clock())
            worker = time.process_time() - started
            started = time.process_time()
            records = [r for message in messages for r in decode_message(message)]
            enqueued = await dispatcher.enqueue(records)
            return worker, time.process_time() - started, enqueued

        await delivery("warm", 0)
        freeze_startup_objects()
        worker_cpu, reader_cpu, enqueued = [], [], []
        for n in range(deliveries):
            worker, reader, new = await delivery(str(n), n)
            worker_cpu.append(worker)
            reader_cpu.append(reader)
            enqueued.append(new)
        assert min(enqueued) >= events, "every event makes at least one delivery"

    def us(samples: list[float]) -> float:  # median per delivery, per event
        return statistics.median(samples) * 1e6 / events

    mixed = f"{workers.PROJECTS} projects each" if shape == "embedded" else "1 project each"
    made = statistics.median(enqueued) / events
    case = (f"dispatcher reader CPU per event (decode + Dispatcher.enqueue), 1 endpoint per project subscribed to "
            f"everything: {deliveries} deliveries of {events:,} records ({mixed}), {made:.1f} webhook deliveries per "
            f"event")  # fmt: skip
    return [
        Figure("webhooks", case, shape, us(reader_cpu), "µs/event",
               baseline_name="workers' CPU on the same deliveries (decode + process_delivery)",
               baseline=us(worker_cpu), ratio=us(reader_cpu) / us(worker_cpu), ratio_note="× the workers' CPU"),
    ]  # fmt: skip
