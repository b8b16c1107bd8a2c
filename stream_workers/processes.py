"""`rewards workers --processes N`: N stream worker processes on one machine, as one Kafka consumer group.

Each child is a whole `rewards workers` process (its own faust app and Kafka consumer): the group splits the
topic's partitions among them, and each writes exactly once as a lone worker does (a plan per partition in the
shared plan store, a token per delivery), as separately started workers always could. So several cores share
the work, and a process waiting on ClickHouse or Redis leaves the CPU to the others.

The parent only starts them, passes SIGTERM and SIGINT on, and fails as one unit: when a child exits while it
runs (a failed offset commit exits 1), it stops the others and exits with that child's status, for the supervisor
to restart the whole set, as it restarts a lone worker. Child i serves its metrics on REWARDS_WORKER_METRICS_PORT
+ i, and with static membership (REWARDS_WORKER_INSTANCE_ID) joins as `<instance id>-<i>`.
"""

import os
import signal
import subprocess
import sys
import time

import structlog

log = structlog.get_logger(__name__)

POLL_S = 0.2


def child_env(index: int, environ: dict[str, str]) -> dict[str, str]:
    """The environment of child `index`: a lone worker, with its own metrics port and static member id."""
    env = {**environ, "REWARDS_WORKER_PROCESSES": "1"}
    port = int(environ.get("REWARDS_WORKER_METRICS_PORT") or 0)
    if port:
        env["REWARDS_WORKER_METRICS_PORT"] = str(port + index)
    if instance := environ.get("REWARDS_WORKER_INSTANCE_ID"):
        env["REWARDS_WORKER_INSTANCE_ID"] = f"{instance}-{index}"
    return env


def run_processes(count: int) -> int:
    """Run `count` worker processes until a signal stops them (0 when all stopped cleanly) or one of them exits
    (its status; 1 if a signal killed it). Returns the status to exit with."""
    children: list[subprocess.Popen] = []
    stopping: list[int] = []  # the signal passed on, once one came

    def stop(signum, _frame=None) -> None:
        if not stopping:
            stopping.append(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    command = [sys.executable, "-m", "rewards", "workers"]
    for index in range(count):
        children.append(subprocess.Popen(command, env=child_env(index, dict(os.environ))))
        if stopping:  # a signal came while the others started
            children[-1].send_signal(stopping[0])
    log.info("worker processes started", processes=count, pids=[child.pid for child in children])
    status: int | None = None
    while any(child.poll() is None for child in children):
        exited = [child for child in children if child.returncode is not None]
        if exited and status is None and not stopping:
            first = exited[0]
            status = first.returncode if first.returncode > 0 else 1
            log.error(
                "a worker process exited; stopping the others (the supervisor restarts them all)",
                pid=first.pid,
                returncode=first.returncode,
            )
            stop(signal.SIGTERM)
        time.sleep(POLL_S)
    if status is None:  # stopped by a signal: clean if every child stopped cleanly (or by that very signal)
        status = max((_status(child.returncode, stopping[0]) for child in children), default=0)
    log.info("worker processes stopped", status=status)
    return status


def _status(returncode: int, signum: int) -> int:
    if returncode in (0, -signum):
        return 0
    return returncode if returncode > 0 else 1
