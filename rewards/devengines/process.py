"""One engine process: started under the guard, probed until ready, stopped and restarted on the same data."""

import atexit
import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager, suppress
from pathlib import Path

log = logging.getLogger("rewards.devengines")

_running: set["Engine"] = set()


class EngineUnavailable(RuntimeError):
    """What an engine needs is missing on this machine (a program, a package): it cannot be started here."""


class EngineFailed(RuntimeError):
    """The engine was there but did not come up."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def file_lock(path: Path):
    """Serializes one-time set-up (a download, an install) between processes, e.g. two test runs at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Engine:
    """A handle on one engine process; `url` stays the same across stop/start/restart."""

    def __init__(
        self,
        name: str,
        env_name: str,
        url: str,
        command: list[str],
        work_dir: Path,
        ready: Callable[[], bool],
        env: dict[str, str] | None = None,
        start_timeout: float = 120.0,
        grace: float = 30.0,
    ):
        self.name = name
        self.env_name = env_name
        self.url = url
        self.command = command
        self.work_dir = work_dir
        self.log_path = work_dir / f"{name}.log"
        self._ready = ready
        self._env = {**os.environ, **(env or {})}
        self._start_timeout = start_timeout
        self._grace = grace
        self._process: subprocess.Popen | None = None
        self.exit_code: int | None = None  # of the last run, once stopped: 0 when the engine shut down cleanly

    @property
    def env_line(self) -> str:
        return f"{self.env_name}={self.url}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> "Engine":
        if self.running:
            return self
        started = time.monotonic()
        self._process = self._launch()
        _running.add(self)
        self._wait_ready()
        log.info("%s ready at %s in %.1f s", self.name, self.url, time.monotonic() - started)
        return self

    def stop(self) -> None:
        """SIGTERM and wait: the engine shuts down as it would in production (the guard SIGKILLs after grace)."""
        process, self._process = self._process, None
        _running.discard(self)
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(self._grace + 10)
            except subprocess.TimeoutExpired:
                self._kill_group(process)
        process.stdin.close()
        self.exit_code = process.returncode

    def kill(self) -> None:
        """SIGKILL the whole process group, as a crash would."""
        process, self._process = self._process, None
        _running.discard(self)
        if process is not None:
            self._kill_group(process)
            process.stdin.close()
            self.exit_code = process.returncode

    def restart(self) -> "Engine":
        self.stop()
        return self.start()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def _launch(self) -> subprocess.Popen:
        guard = [sys.executable, "-m", "rewards.devengines.guard", "--grace", str(self._grace), "--"]
        with open(self.log_path, "ab") as log_file:
            # Our own session: a Ctrl-C in the terminal reaches us only, and we stop engines in order.
            return subprocess.Popen(
                guard + self.command,
                cwd=self.work_dir,
                env=self._env,
                stdin=subprocess.PIPE,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise self._failed("exited while starting")
            if self._ready():
                return
            time.sleep(0.1)
        raise self._failed(f"not ready in {self._start_timeout:.0f} s")

    def _failed(self, what: str) -> EngineFailed:
        self.kill()
        return EngineFailed(f"{self.name} {what}; log {self.log_path}:\n{self.log_tail()}")

    @staticmethod
    def _kill_group(process: subprocess.Popen) -> None:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@atexit.register
def _stop_all() -> None:
    for engine in list(_running):
        engine.stop()
