"""One hot project beyond one partition (issue 32): how fast the workers write ONE project's backlog, with its
conversions on its one partition (REWARDS_CONVERSION_SHARDS=1: one worker process can take it), and spread over the
partitions by user (the default) with one and with two worker processes; the embedded default's one log beside them.

Method: one project (a 4-level referral chain, as bench/ingest.py's) is loaded for `seconds` at the saturating rate
with the workers stopped (production; the embedded default's worker runs in its one process meanwhile); then the
workers are started, and the warehouse's count of the project's conversions is sampled: the rate is the steady one,
between 10% and 90% of the backlog written (a worker's start-up and a last partial delivery left out).
"""

import os
import subprocess
import sys
import time
from dataclasses import dataclass

import psutil
import redis

from bench.context import Context
from bench.ingest import LIMITS, Load, _drain, _engine_pids, _load, project_and_key
from bench.report import Figure
from rewards.devengines.clickhouse import connect
from rewards.settings import Settings
from tests.support.harness import ProductionServer, Server, stop_processes

SCALE_TARGET = 1.8  # two worker processes over one partition's one
FROM, TO = 0.1, 0.9  # the share of the backlog between which the rate is measured


@dataclass(frozen=True)
class Case:
    name: str
    shards: int  # REWARDS_CONVERSION_SHARDS
    workers: int  # worker processes


SPREAD = Settings().conversion_shards  # the default: 4 partitions

CASES = (Case("one partition, 1 worker process", 1, 1), Case(f"spread over {SPREAD}, 1 worker process", SPREAD, 1),
         Case(f"spread over {SPREAD}, 2 worker processes", SPREAD, 2))  # fmt: skip


def run(context: Context) -> list[Figure]:
    load = context.size(Load(20, projects=1), Load(6, projects=1), Load(1, projects=1, referred_users=5, rate=2_000,
                                                                        connections=4))  # fmt: skip
    # The smoke test runs the two-process case alone (the others are the same code with other numbers), its own
    # baseline: one production stack started instead of three.
    cases = CASES[-1:] if context.smoke else CASES
    measured = {case: _production(context, case, load) for case in cases}
    single = measured[cases[0]].rate
    figures = []
    for case, steady in measured.items():
        figures += [
            Figure("hot project", f"one project's events written/s: {case.name}", "production", steady.rate,
                   "events/s", baseline_name=cases[0].name, baseline=single,
                   ratio=steady.rate / single if single else None, ratio_note="× one partition",
                   target=f"≥ {SCALE_TARGET}×" if case.workers == 2 else "",
                   met=(steady.rate / single >= SCALE_TARGET if single else False) if case.workers == 2 else None),
            Figure("hot project", f"CPU busy meanwhile, of {os.cpu_count()} cores: {case.name}", "production",
                   steady.busy * 100, "%"),
            *(Figure("hot project", f"of it {who}'s: {case.name}", "production", share * 100, "% of all cores")
              for who, share in steady.shares.items()),
        ]  # fmt: skip
    embedded = _embedded(context, load)
    figures.append(Figure("hot project", "one project's events processed/s: one log (accepted → written, load + "
                          "drain)", "embedded", embedded, "events/s"))  # fmt: skip
    return figures


def _production(context: Context, case: Case, load: Load) -> "Steady":
    env = {"REWARDS_RATE_LIMITS": LIMITS, "REWARDS_LOG_LEVEL": "warning", "REWARDS_MAX_BACKLOG": "0",
           "REWARDS_CONVERSION_SHARDS": str(case.shards)}  # fmt: skip
    ingest_processes = 1 if context.smoke else os.cpu_count() or 1  # (the smoke test: one process starts sooner)
    server = ProductionServer(context.engine_env, env, ingest_processes=ingest_processes).start()
    extra: list[subprocess.Popen] = []
    try:
        project_id, key = project_and_key(server, load.referred_users)
        stop_processes([server.processes["workers"]])  # leaves the group: the backlog waits for the workers below
        loaded = _load(server.urls["ingest"], [key], load, load.rate)
        command, env = [sys.executable, "-m", "rewards", "workers"], {**server.env, "REWARDS_WORKER_METRICS_PORT": "0"}
        extra += [subprocess.Popen(command, env=env) for _ in range(case.workers)]
        redis_client = redis.Redis.from_url(context.engine_env["REDIS_URL"])
        redis_client.config_resetstat()
        groups = {"the worker processes": [psutil.Process(worker.pid) for worker in extra]}
        groups |= {name: [psutil.Process(pid)] for name, pid in sorted(_engine_pids(context).items())}
        steady = _steady(context.engine_env["CLICKHOUSE_URL"], project_id, loaded["accepted"], groups)
        _print_redis_profile(case, redis_client, loaded["accepted"])
        return steady
    finally:
        stop_processes(extra)
        server.stop()


@dataclass(frozen=True)
class Steady:
    rate: float  # events/s written
    busy: float  # the machine's CPU busy meanwhile, a share of all its cores
    shares: dict[str, float]  # the CPU of each group of processes meanwhile (workers, engines), a share of all cores


def _steady(
    clickhouse_url: str, project_id: str, accepted: int, groups: dict[str, list], timeout_s: float = 600
) -> Steady:
    """Events/s written between FROM and TO of the `accepted` backlog (counted in the warehouse), and the CPU spent
    meanwhile."""
    client = connect(clickhouse_url)
    try:
        marks: dict[float, tuple[float, ...]] = {}  # share → (time, machine busy CPU s, each group's CPU s)
        deadline = time.monotonic() + timeout_s
        while len(marks) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the backlog was not written within {timeout_s} s")
            written = client.query(
                "SELECT count() FROM conversions WHERE project_id = {p:String}", parameters={"p": project_id}
            ).result_rows[0][0]
            for share in (FROM, TO):
                if share not in marks and written >= share * accepted:
                    cpu = (sum(map(_cpu_s, processes)) for processes in groups.values())
                    marks[share] = (time.monotonic(), _busy_s(), *cpu)
            time.sleep(0.05)
    finally:
        client.close()
    (start, *before), (end, *after) = marks[FROM], marks[TO]
    elapsed, cores = max(end - start, 1e-3), os.cpu_count() or 1
    busy, *shares = ((b - a) / elapsed / cores for a, b in zip(before, after, strict=True))
    return Steady((TO - FROM) * accepted / elapsed, busy, dict(zip(groups, shares, strict=True)))


def _print_redis_profile(case: Case, client, events: int) -> None:
    """Where Redis's CPU went while the backlog was written (INFO commandstats): µs per event by command, on stderr."""
    stats = client.info("commandstats")
    top = sorted(stats.items(), key=lambda item: -item[1]["usec"])[:10]
    rows = ", ".join(f"{name.removeprefix('cmdstat_')} {s['usec'] / events:.1f} µs ({s['calls']} calls)"
                     for name, s in top)  # fmt: skip
    print(f"redis, {case.name}: {rows}", file=sys.stderr)
    client.close()


def _busy_s() -> float:
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def _cpu_s(process: psutil.Process) -> float:
    """CPU seconds of a process and its children."""
    total = 0.0
    for each in [process, *process.children(recursive=True)]:
        try:
            times = each.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _embedded(context: Context, load: Load) -> float:
    env = {"REWARDS_RATE_LIMITS": LIMITS, "REWARDS_LOG_LEVEL": "warning", "REWARDS_MAX_BACKLOG": "0"}
    server = Server(context.data_root / "hot" / f"embedded-{int(time.time())}", env).start()
    try:
        _, key = project_and_key(server, load.referred_users)
        loaded = _load(server.urls["ingest"], [key], load, load.rate)
        drain_s = _drain(server, loaded["last_ids"])
        return loaded["accepted"] / (loaded["seconds"] + drain_s)
    finally:
        server.stop()
