"""Ingest throughput, freshness and memory under load, both shapes, beside the web layer's ceiling.

For each shape: start the service as real processes, create projects (a key with a raised batch limit,
a payout config, a 4-level referral chain with referred users), then run the load generator and the
freshness probe at once (bench/load.py, processes of their own) while sampling every process's RSS.
After the load, wait for the backlog to be processed: accepted events over (load + drain) time is the
pipeline's processing rate. Then freshness again under a steady load at half that rate (no backlog:
the pipeline's own delay). Then the saturating load again on a server started with a small back-pressure bound
(REWARDS_MAX_BACKLOG): accepted is what the pipeline processes, and freshness stays bounded. The baseline is
bench/baseline_app.py on the same number of processes.
"""

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import psutil

from bench import stages
from bench.context import Context
from bench.load import BATCH, USERS
from bench.report import Figure
from tests.support.harness import Admin, ProductionServer, Server, free_port, stop_processes, wait_healthy

PROJECTS = 8
CONNECTIONS = 64
REFERRED_USERS = 100  # per project, the first of bench.load.USERS: their purchases pay 4 levels of commissions
LIMITS = json.dumps({"events_batch": "100000000/minute", "events_single": "100000000/minute"})
CONFIG = {
    "default_tier": "base",
    "tiers": [{"id": "base", "name": "Base", "rank": 1,
               "rates": {"r1": "0.1", "r2": "0.05", "r3": "0.02", "r4": "0.01"}}],
    "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "1"}, "currency": "point",
                     "end_user_reward": {"rate": "0.1"}}],
}  # fmt: skip
STEADY_SHARE = 0.5
INGEST_TARGET_EVENTS_S = 100_000
BASELINE_SHARE_TARGET = 0.3
FRESHNESS_TARGET_MS = 1000
INGEST_RSS_TARGET_MB = 300
# Back-pressure: messages (one per accepted batch) that may wait for the workers before the edge answers 503. Not
# much less than the workers' full deliveries across the active partitions (8 projects × 100 messages): a smaller
# bound starves them into small deliveries, each costing its fixed round trips (100: production accepted and
# processed ~1,400 events/s, 57% of requests refused). The drain after the load is then the bound's worth.
BACKPRESSURE_BOUND = 1000
PROCESSED_SHARE_TARGET = 0.9


@dataclass(frozen=True)
class Load:
    seconds: float
    projects: int = PROJECTS
    referred_users: int = REFERRED_USERS
    rate: float | None = None  # events/s; None: as fast as the server accepts (the saturating load)
    connections: int = CONNECTIONS


def run(context: Context) -> list[Figure]:
    # The smoke test's load is small and paced, so that its drain is short: it proves the suite runs.
    load = context.size(Load(15), Load(5), Load(1, projects=2, referred_users=5, rate=2_000, connections=4))
    processes = 1 if context.smoke else os.cpu_count() or 1  # (the smoke test: one process starts sooner)
    figures = []
    bounded = {"REWARDS_MAX_BACKLOG": str(BACKPRESSURE_BOUND)}
    for shape, ingest_processes in (("embedded", 1), ("production", processes)):
        baseline = _baseline(ingest_processes, load)
        # The smoke test's small load never meets the bound: one server (bounded) serves both measurements.
        server = _start(shape, context, ingest_processes, bounded if context.smoke else None)
        try:
            engines = _engine_pids(context) if shape == "production" else {}
            figures += _measure(shape, server, baseline, load, engines)
            if context.smoke:
                figures += _measure_backpressure(shape, server, load)
        finally:
            server.stop()
        if context.smoke:
            continue
        server = _start(shape, context, ingest_processes, bounded)
        try:
            figures += _measure_backpressure(shape, server, load)
        finally:
            server.stop()
    return figures


def _start(shape: str, context: Context, ingest_processes: int, settings: dict[str, str] | None = None):
    env = {"REWARDS_RATE_LIMITS": LIMITS, "REWARDS_LOG_LEVEL": "warning", **(settings or {})}
    if shape == "embedded":
        data_dir = context.data_root / "ingest" / f"embedded-{int(time.time())}"
        return Server(data_dir, env).start()
    return ProductionServer(context.engine_env, env, ingest_processes=ingest_processes).start()


def _baseline(processes: int, load: Load) -> dict:
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "bench.baseline_app:create", "--factory", "--port", str(port),
               "--workers", str(processes), "--log-level", "warning", "--no-access-log"]  # fmt: skip
    server = subprocess.Popen(command)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, [server])
        return _load(url, ["baseline"], load)
    finally:
        stop_processes([server])


def _load(url: str, keys: list[str], load: Load, rate: float | None = None) -> dict:
    command = [sys.executable, "-m", "bench.load", "load", "--url", url, "--keys", ",".join(keys),
               "--seconds", str(load.seconds), "--connections", str(load.connections)]  # fmt: skip
    if rate:
        command += ["--rate", str(rate)]
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def _load_and_probe(server, keys: list[str], load: Load, rate: float | None = None) -> tuple[dict, dict]:
    """The load, and the freshness probe running beside it (on a project of its own)."""
    probe = subprocess.Popen(
        [sys.executable, "-m", "bench.load", "probe", "--url", server.urls["ingest"], "--query-url",
         server.urls["query"], "--keys", keys[0], "--seconds", str(load.seconds)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    loaded = _load(server.urls["ingest"], keys[1:], load, rate)
    return loaded, json.loads(probe.communicate()[0])


def _measure(shape: str, server, baseline: dict, load: Load, engine_pids: dict[str, int]) -> list[Figure]:
    keys = [_project(server, load.referred_users) for _ in range(load.projects + 1)]
    memory = PeakRss({**_service_pids(server), **engine_pids})
    idle = memory.sample()
    memory.start()
    loaded, freshness = _load_and_probe(server, keys, load, load.rate)
    drain_s = _drain(server, loaded["last_ids"])
    memory.stop()
    processed_per_s = loaded["accepted"] / (loaded["seconds"] + drain_s)
    # The pipeline's own delay, without a backlog: a steady load well within what it processes.
    steady_rate = max(BATCH, round(STEADY_SHARE * processed_per_s, -2))
    before = stages.scrape(_metrics_urls(server))
    steady, steady_freshness = _load_and_probe(server, keys, load, steady_rate)
    _drain(server, steady["last_ids"])
    steady_stages = stages.breakdown(before, stages.scrape(_metrics_urls(server)))
    return [
        *_ingest_figures(shape, loaded, baseline, load.connections),
        Figure("ingest", "processed events/s (accepted → warehouse, load + drain)", shape, processed_per_s,
               "events/s", baseline_name="accepted", baseline=loaded["events_per_s"],
               ratio=processed_per_s / loaded["events_per_s"], ratio_note="of accepted"),
        _freshness_figure(shape, "under the saturating load above", freshness),
        _freshness_figure(shape, f"under a steady {steady_rate:,.0f} events/s ({STEADY_SHARE} of processed)",
                          steady_freshness),
        *_stage_figures(shape, steady_stages),
        *_memory_figures(shape, memory.peaks, idle),
    ]  # fmt: skip


def _measure_backpressure(shape: str, server, load: Load) -> list[Figure]:
    """The same saturating load on a server that refuses batches (503, Retry-After) while more than
    BACKPRESSURE_BOUND messages wait for the workers; the load sends each refused batch again after Retry-After."""
    keys = [_project(server, load.referred_users) for _ in range(load.projects + 1)]
    loaded, freshness = _load_and_probe(server, keys, load, load.rate)
    drain_s = _drain(server, loaded["last_ids"])
    processed_per_s = loaded["accepted"] / (loaded["seconds"] + drain_s)
    refused = loaded["refused"] / max(1, loaded["requests"])
    bound = f"REWARDS_MAX_BACKLOG={BACKPRESSURE_BOUND}"
    return [
        Figure("backpressure", f"POST /events/batch accepted, the saturating load, {bound} ({refused:.0%} of "
               "requests answered 503 and sent again)", shape, loaded["events_per_s"], "events/s"),
        Figure("backpressure", f"processed events/s (load + drain: {drain_s:.1f} s after the load), {bound}", shape,
               processed_per_s, "events/s", baseline_name="accepted", baseline=loaded["events_per_s"],
               ratio=processed_per_s / loaded["events_per_s"], ratio_note="of accepted",
               target=f"≥ {PROCESSED_SHARE_TARGET} of accepted",
               met=processed_per_s >= PROCESSED_SHARE_TARGET * loaded["events_per_s"]),
        _freshness_figure(shape, f"under the saturating load, {bound}", freshness),
    ]  # fmt: skip


def _freshness_figure(shape: str, load: str, freshness: dict) -> Figure:
    return Figure(
        "freshness", f"200 → payouts visible, {load} ({freshness['probes']} probes)", shape, freshness["p50_ms"],
        "ms", p99=freshness["p99_ms"], target=f"p99 < {FRESHNESS_TARGET_MS} ms",
        met=freshness["probes"] > 0 and freshness["p99_ms"] < FRESHNESS_TARGET_MS,
    )  # fmt: skip


def _stage_figures(shape: str, breakdown: dict[str, tuple[float, float, int]]) -> list[Figure]:
    """Where the steady load's time went (rewards.stages): received → each stage, the edge's per batch, the
    workers' per delivery (its oldest event)."""
    return [
        Figure("freshness", f"stage: received → {stage}, the steady load ({count:,} {_counted(stage)})", shape, p50,
               "ms", p99=p99)
        for stage, (p50, p99, count) in breakdown.items()
    ]  # fmt: skip


def _counted(stage: str) -> str:
    return "batches" if stage == "published" else "deliveries"


def _metrics_urls(server) -> list[tuple[str, int]]:
    """Where the stage histograms are served, each with its number of processes."""
    if isinstance(server, Server):
        return [(server.url, 1)]
    return [(server.urls["ingest"], server.ingest_processes)] + [(url, 1) for url in server.worker_metrics_urls]


def _ingest_figures(shape: str, loaded: dict, baseline: dict, connections: int = CONNECTIONS) -> list[Figure]:
    share = loaded["events_per_s"] / baseline["events_per_s"]
    target = f"≥ {BASELINE_SHARE_TARGET} of baseline"
    met = share >= BASELINE_SHARE_TARGET
    if shape == "production":
        target = f"≥ {INGEST_TARGET_EVENTS_S:,} events/s and {target}"
        met = met and loaded["events_per_s"] >= INGEST_TARGET_EVENTS_S
    errors = f", errors {loaded['errors']}" if loaded["errors"] else ""
    case = f"POST /events/batch, 100 events/batch, {connections} connections{errors}"
    return [
        Figure("ingest", case, shape, loaded["events_per_s"], "events/s", baseline_name="web layer",
               baseline=baseline["events_per_s"], ratio=share, ratio_note="of baseline", target=target, met=met),
        Figure("ingest", "POST /events/batch latency", shape, loaded["p50_ms"], "ms", p99=loaded["p99_ms"],
               baseline_name="web layer p50", baseline=baseline["p50_ms"], ratio=loaded["p50_ms"] / baseline["p50_ms"],
               ratio_note="× baseline"),
    ]  # fmt: skip


def _memory_figures(shape: str, peaks: dict[str, float], idle: dict[str, float]) -> list[Figure]:
    figures = []
    for role, peak in sorted(peaks.items()):
        target = f"< {INGEST_RSS_TARGET_MB} MB" if role.startswith("ingest") or role == "serve" else ""
        figures.append(
            Figure("memory", f"peak RSS: {role}", shape, peak, "MB", baseline_name="idle", baseline=idle.get(role),
                   ratio=peak / idle[role] if idle.get(role) else None, ratio_note="× idle", target=target,
                   met=peak < INGEST_RSS_TARGET_MB if target else None)
        )  # fmt: skip
    return figures


def _project(server, referred_users: int) -> str:
    return project_and_key(server, referred_users)[1]


def project_and_key(server, referred_users: int) -> tuple[str, str]:
    """A project set up for the load (its payout config, a 4-level referral chain over `referred_users`), and a
    service_role key of it."""
    admin = Admin(server)
    project_id = admin.project()
    key = admin.key(project_id, "service_role")
    with httpx.Client(base_url=f"{server.urls['ingest']}/api/v1", headers={"Authorization": f"Bearer {key}"}) as api:
        api.put("/projects/config", json=CONFIG).raise_for_status()
        affiliates = [f"0x{0xAFF000 + level:040x}" for level in range(4)]
        codes = [_code(api, owner) for owner in affiliates]
        for referred, code in zip(affiliates[1:], codes, strict=False):
            _use(api, code, referred)
        for user in USERS[:referred_users]:
            _use(api, codes[-1], user)
    return project_id, key


def _code(api: httpx.Client, owner: str) -> str:
    body = {"user_identifier": owner, "user_identifier_type": "evm_address", "quantity": 1}
    response = api.post("/referral_codes", json=body)
    response.raise_for_status()
    return response.json()[0]["code"]


def _use(api: httpx.Client, code: str, user: str) -> None:
    body = {"user_identifier": user, "user_identifier_type": "evm_address"}
    api.patch(f"/referral_codes/{code}/use", json=body).raise_for_status()


def _drain(server, last_ids: dict[str, str], timeout_s: float = 600) -> float:
    """Seconds until the last accepted batch of every project is processed."""
    started = time.monotonic()
    with httpx.Client(base_url=f"{server.urls['ingest']}/api/v1", timeout=30) as client:
        for key, dedup_id in last_ids.items():
            headers = {"Authorization": f"Bearer {key}"}
            while client.get("/events/status", params={"dedup_id": dedup_id}, headers=headers).json()["status"] != (
                "processed"
            ):
                if time.monotonic() - started > timeout_s:
                    raise RuntimeError(f"the backlog was not processed within {timeout_s} s")
                time.sleep(0.05)
    return time.monotonic() - started


def _service_pids(server) -> dict[str, int]:
    if isinstance(server, Server):
        return {"serve": server.process.pid}
    return {name if name == "workers" else f"{name}-api": p.pid for name, p in server.processes.items()}


def _engine_pids(context: Context) -> dict[str, int]:
    """The process listening on each engine's port (the engines run under a guard process of their own)."""
    ports = {}
    for name, url in context.engine_env.items():
        ports[urlsplit(url if "://" in url else f"//{url}").port] = name.split("_")[0].lower()
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:  # some systems show other users' sockets to root only: measure the services alone
        return {}
    return {
        ports[c.laddr.port]: c.pid
        for c in connections
        if c.status == psutil.CONN_LISTEN and c.laddr.port in ports and c.pid
    }


class PeakRss:
    """The peak resident memory of each role's processes (the role's root process or any of its children:
    `--processes N` serves from N children), sampled every 100 ms on a thread."""

    def __init__(self, roles: dict[str, int]):
        self.roles = roles
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> dict[str, float]:
        sizes = {}
        for role, pid in self.roles.items():
            try:
                root = psutil.Process(pid)
                tree = [root, *root.children(recursive=True)]
                sizes[role] = max(_rss_mb(process) for process in tree)
            except psutil.NoSuchProcess:
                continue
        return sizes

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for role, size in self.sample().items():
                self.peaks[role] = max(size, self.peaks.get(role, 0.0))


def _rss_mb(process: psutil.Process) -> float:
    try:
        return process.memory_info().rss / 2**20
    except psutil.NoSuchProcess:
        return 0.0
