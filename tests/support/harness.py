"""Start the service as real processes (either shape) and talk to it as a client would."""

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from rewards.web.routing import service_for
from runtime.wiring import open_embedded_state

# Claim checks expire within half a second of their time (tests/ingest_api/test_claim_expiry.py), not a minute.
FAST_SWEEPS = {
    "REWARDS_CLAIM_EXPIRY_SWEEP_S": "0.5",
    # Erasure rounds as soon as a request waits (tests/ingest_api/test_erasures.py), and no wait for publishes in flight
    # (the tests' edges answer before a round begins).
    "REWARDS_ERASURE_ROUND_GAP_S": "0",
    "REWARDS_ERASURE_PUBLISH_GRACE_S": "0",
    # Workers SIGKILLed by a test leave their leases on the shared Redis: a round waits this long for them.
    "REWARDS_WORKER_LEASE_S": "3",
}
# The servers' log level: REWARDS_TEST_LOG_LEVEL=info shows their info lines (a worker's deliveries and rebalances) in a
# failing test's captured output.
SERVER_LOG_LEVEL = os.environ.get("REWARDS_TEST_LOG_LEVEL", "warning")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`rewards serve`: the embedded default, every endpoint in one process."""

    shape = "embedded"

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None):
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.urls = {"ingest": self.url, "query": self.url}
        self.env = {**os.environ, "REWARDS_LOG_LEVEL": SERVER_LOG_LEVEL, **FAST_SWEEPS, **(env or {})}
        self.process: subprocess.Popen | None = None

    def start(self) -> "Server":
        command = [sys.executable, "-m", "rewards", "serve", "--port", str(self.port), "--data-dir", str(self.data_dir)]
        self.process = subprocess.Popen(command, env=self.env)
        wait_healthy(self.url, [self.process])
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop_processes([self.process], sig)

    async def open_state(self):
        return open_embedded_state(self.data_dir)


class ProductionServer:
    """The production shape: `rewards ingest-api`, `rewards query-api` and `rewards workers` as separate
    processes on real Kafka, Redis and ClickHouse (after `rewards migrate`)."""

    shape = "production"

    def __init__(
        self, engine_env: dict[str, str], env: dict[str, str] | None = None, ingest_processes: int = 1,
        webhooks: bool = False, worker_processes: int = 1,
    ):  # fmt: skip
        self.ingest_processes = ingest_processes
        self.worker_processes = worker_processes  # `rewards workers` processes sharing the partitions
        self.webhooks = webhooks  # also run `rewards webhooks` (the dispatcher)
        self.ports = {"ingest": free_port(), "query": free_port(), "worker_metrics": free_port()}
        # Each worker process serves its own /metrics: the first on ports["worker_metrics"], the others after it.
        self.worker_metrics_ports = [self.ports["worker_metrics"]] + [free_port() for _ in range(worker_processes - 1)]
        # No worker metrics port in `env`: a worker process started from it by a test serves none (two on one port:
        # the second dies at start, "Address already in use"); start_workers gives each of the stack's its own.
        self.env = {**os.environ, "REWARDS_LOG_LEVEL": SERVER_LOG_LEVEL, **FAST_SWEEPS, **engine_env, **(env or {})}
        self.urls = {name: f"http://127.0.0.1:{self.ports[name]}" for name in ("ingest", "query")}
        self.url = self.urls["ingest"]
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self) -> "ProductionServer":
        migrate = [sys.executable, "-m", "rewards", "migrate"]
        subprocess.run(migrate, env=self.env, check=True, stdout=subprocess.DEVNULL)
        try:
            for name in ("ingest", "query"):
                command = [sys.executable, "-m", "rewards", f"{name}-api", "--port", str(self.ports[name])]
                if name == "ingest":
                    command += ["--processes", str(self.ingest_processes)]
                self.processes[name] = subprocess.Popen(command, env=self.env)
            for n in range(1, self.worker_processes + 1):
                self.start_workers(n)
            if self.webhooks:
                self.start_webhooks()
            for name in ("ingest", "query"):
                wait_healthy(self.urls[name], list(self.processes.values()))
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def worker_metrics_urls(self) -> list[str]:
        """Every worker process's /metrics base URL (a record is counted by whichever process took its partition)."""
        return [f"http://127.0.0.1:{port}" for port in self.worker_metrics_ports]

    def start_workers(self, n: int = 1) -> subprocess.Popen:
        """Worker process `n` (`workers`, then `workers-2`, …), with its own /metrics port."""
        name = "workers" if n == 1 else f"workers-{n}"
        env = {**self.env, "REWARDS_WORKER_METRICS_PORT": str(self.worker_metrics_ports[n - 1])}
        self.processes[name] = subprocess.Popen([sys.executable, "-m", "rewards", "workers"], env=env)
        return self.processes[name]

    def start_webhooks(self) -> subprocess.Popen:
        self.processes["webhooks"] = subprocess.Popen([sys.executable, "-m", "rewards", "webhooks"], env=self.env)
        return self.processes["webhooks"]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop_processes(list(self.processes.values()), sig)

    async def open_state(self):
        from rewards.adapters.production.redis_state import open_redis_state

        return await open_redis_state(self.env["REDIS_URL"])


def wait_healthy(url: str, processes: list[subprocess.Popen], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        exited = [p for p in processes if p.poll() is not None]
        if exited:
            raise RuntimeError(f"{exited[0].args} exited with {exited[0].returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not become healthy")


def stop_processes(processes: list[subprocess.Popen | None], sig: int = signal.SIGTERM) -> None:
    running = [p for p in processes if p is not None and p.poll() is None]
    for process in running:
        process.send_signal(sig)
    for process in running:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_async(coroutine):
    """Run a coroutine to completion from sync or async test code alike."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class Admin:
    """What `rewards project` / `rewards key` do, in-process, on the server's state store."""

    def __init__(self, server):
        self.server = server

    def _do(self, action):
        async def run():
            state = await self.server.open_state()
            try:
                return await action(state)
            finally:
                await state.close()

        return run_async(run())

    def project(self, name: str = "test") -> str:
        return self._do(lambda s: s.create_project(name))

    def key(self, project_id: str, *scopes: str) -> str:
        return self._do(lambda s: s.create_key(project_id, scopes))

    def revoke(self, api_key: str) -> None:
        self._do(lambda s: s.revoke_key(api_key))

    def delete(self, project_id: str) -> None:
        self._do(lambda s: s.delete_project(project_id))


def url_for(server: Server | ProductionServer, method: str, path: str) -> str:
    """The URL of `path` (`/api/v1/…`) on the service of `server` that answers it: routed by `rewards/web/routing.py`,
    as the production gateway routes (both services are one in the embedded shape)."""
    return server.urls[service_for(method, path)] + path


class Api(httpx.Client):
    """A client of one project, with a key of the given scopes."""

    def __init__(self, server: Server | ProductionServer, api_key: str, project_id: str):
        headers = {"Authorization": f"Bearer {api_key}"}
        super().__init__(base_url=f"{server.urls['ingest']}/api/v1", headers=headers, timeout=30)
        self.server = server
        self.api_key = api_key
        self.project_id = project_id

    def request(self, method: str, url, **kwargs) -> httpx.Response:
        """Relative paths go to the service that answers them, as the production gateway routes."""
        if isinstance(url, str) and url.startswith("/"):
            url = url_for(self.server, method, "/api/v1" + url)
        return super().request(method, url, **kwargs)

    def settle(self, timeout_s: float = 10) -> None:
        """Wait until every record the project published so far is written. A conversion processed says so only of
        its own partition's: the production shape spreads conversions by user (schemas.topics), while code uses,
        affiliates, tracking events… keep the project's own partition, in order. So: one batch (one request of the
        key's 10 a minute) of a conversion of a name no rule pays on every shard of the project (shard 0 is the
        project's own partition), each processed."""
        users = shard_users(self.project_id, conversion_shards(self.server))
        sentinels = [f"settle-{uuid.uuid4().hex}" for _ in users]
        events = [{"name": "settle", "user_identifier": u, "user_identifier_type": "evm_address", "dedup_id": d}
                  for u, d in zip(users, sentinels, strict=True)]  # fmt: skip
        answer = self.post("/events/batch", json={"events": events})
        assert answer.status_code == 200, answer.text
        self.wait_processed(*sentinels, timeout_s=timeout_s)

    def wait_processed(self, *dedup_ids: str, timeout_s: float = 10) -> None:
        deadline = time.monotonic() + timeout_s
        pending = set(dedup_ids)
        while pending and time.monotonic() < deadline:
            pending = {
                d for d in pending if self.get("/events/status", params={"dedup_id": d}).json()["status"] != "processed"
            }
            if pending:
                time.sleep(0.05)
        assert not pending, f"not processed in {timeout_s}s: {sorted(pending)}"


def metric_total(urls: list[str], sample: "re.Pattern[str]") -> float:
    """`sample`'s values (its first group) summed over every line of every URL's /metrics: the worker processes of
    the production shape each serve their own."""
    return sum(
        float(found.group(1)) for url in urls for found in sample.finditer(httpx.get(f"{url}/metrics", timeout=10).text)
    )


def conversion_shards(server: "Server | ProductionServer") -> int:
    """How many partitions the server spreads one project's conversions over (REWARDS_CONVERSION_SHARDS; 0: all)."""
    from rewards.settings import Settings

    def setting(name: str) -> int:
        return int(server.env.get(f"REWARDS_{name.upper()}", Settings.model_fields[name].default))

    return setting("conversion_shards") or setting("events_partitions")


def shard_users(project_id: str, shards: int) -> list[str]:
    """One EVM address per shard of the project's conversions, in shard order (the first: the project's own
    partition)."""
    from schemas.topics import shard_of

    found: dict[int, str] = {}
    for n in range(100_000):
        user = f"0x{0x5E771E << 136 | n:040x}"
        found.setdefault(shard_of(project_id, "evm_address", user, shards), user)
        if len(found) == max(shards, 1):
            return [found[shard] for shard in sorted(found)]
    raise AssertionError(f"no user on some of the project's {shards} shards")


def eventually(check, timeout_s: float = 10):
    """Run `check` until it raises nothing: reads of the warehouse follow writes shortly, and a read made too early
    may fail in any way (an assertion, an unpacking of a list not yet full, a key not yet there). Past the deadline,
    the last failure is raised."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class Gateway:
    """One base URL for a server's services, routed as the production gateway routes (deploy/gateway.conf, generated
    from rewards/web/routing.py): what a client with a single base URL (the published JavaScript client) is pointed
    at. The embedded shape needs none: its one process answers every path."""

    HOP_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host"})

    def __init__(self, server: Server | ProductionServer):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from threading import Thread

        client = httpx.Client(timeout=60)
        hop = self.HOP_HEADERS

        class Forward(BaseHTTPRequestHandler):
            def _forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?", 1)[0]
                url = server.urls[service_for(self.command, path)] + self.path
                headers = {k: v for k, v in self.headers.items() if k.lower() not in hop}
                answer = client.request(self.command, url, headers=headers, content=body)
                self.send_response(answer.status_code)
                for name, value in answer.headers.items():
                    if name.lower() not in hop | {"content-encoding"}:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _forward

            def log_message(self, *args):  # the services log every request already
                pass

        class Quiet(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
                    return  # the client hung up before its answer (as a gateway would, nothing to print)
                super().handle_error(request, client_address)

        self._client = client
        self._http = Quiet(("127.0.0.1", 0), Forward)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        Thread(target=self._http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._client.close()
