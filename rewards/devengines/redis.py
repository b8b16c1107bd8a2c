"""Redis as a local process on 127.0.0.1, with its append-only file in a private directory."""

import os
import shutil
import subprocess
from pathlib import Path

from rewards.devengines.process import Engine, EngineUnavailable, file_lock, free_port, log


def redis_server() -> str:
    found = shutil.which("redis-server")
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        with file_lock(Path("/tmp/rewards-engines-apt.lock")):
            found = shutil.which("redis-server") or _apt_install()
    if found is None:
        raise EngineUnavailable("redis: redis-server not found on PATH (apt-get install redis-server)")
    return found


def _apt_install() -> str | None:
    log.warning("redis: redis-server missing, installing it: apt-get update && apt-get install -y redis-server")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "redis-server"]):
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise EngineUnavailable(f"redis: {' '.join(command)} failed:\n{(result.stdout + result.stderr)[-2000:]}")
    return shutil.which("redis-server")


def redis_engine(work_dir: Path) -> Engine:
    server = redis_server()
    work_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes"]
    command += ["--dir", str(work_dir), "--daemonize", "no"]
    url = f"redis://127.0.0.1:{port}/0"
    return Engine("redis", "REDIS_URL", url, command, work_dir, lambda: _answers_ping(url))


def start_redis(work_dir: Path) -> Engine:
    return redis_engine(work_dir).start()


def _answers_ping(url: str) -> bool:
    import redis

    try:
        with redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1) as client:
            return client.ping()
    except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
        return False
