"""Start `rewards serve` as a real process and talk to it as a client would."""

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from rewards.backends import open_embedded_state


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, data_dir: Path, env: dict[str, str] | None = None):
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "REWARDS_LOG_LEVEL": "warning", **(env or {})}
        self.process: subprocess.Popen | None = None

    def start(self) -> "Server":
        command = [sys.executable, "-m", "rewards", "serve", "--port", str(self.port), "--data-dir", str(self.data_dir)]
        self.process = subprocess.Popen(command, env=self.env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"rewards serve exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("rewards serve did not become healthy")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)


def run_async(coroutine):
    """Run a coroutine to completion from sync or async test code alike."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class Admin:
    """What `rewards project` / `rewards key` do, in-process, on the server's data dir."""

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir

    def _do(self, action):
        async def run():
            state = open_embedded_state(self.data_dir)
            try:
                return await action(state)
            finally:
                await state.close()

        return run_async(run())

    def project(self) -> str:
        return self._do(lambda s: s.create_project("test"))

    def key(self, project_id: str, *scopes: str) -> str:
        return self._do(lambda s: s.create_key(project_id, scopes))

    def revoke(self, api_key: str) -> None:
        self._do(lambda s: s.revoke_key(api_key))

    def delete(self, project_id: str) -> None:
        self._do(lambda s: s.delete_project(project_id))


class Api(httpx.Client):
    """A client of one project, with a key of the given scopes."""

    def __init__(self, server: Server, api_key: str, project_id: str):
        super().__init__(base_url=f"{server.url}/api/v1", headers={"Authorization": f"Bearer {api_key}"}, timeout=30)
        self.api_key = api_key
        self.project_id = project_id

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


def eventually(check, timeout_s: float = 10):
    """Run `check` until it stops raising AssertionError: reads of the warehouse follow writes shortly."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
