"""Real engines and real worker processes for the Kafka tests (no conftest: the fixtures live in the test module)."""

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from rewards.devengines import Engine, EngineFailed, EngineUnavailable
from rewards.domain.payout_config import PayoutConfig
from rewards.settings import Settings
from schemas.records import ConversionRecord
from schemas.topics import EVENTS_TOPIC, shard_of

PARTITIONS = 4  # of the events topic the tests create
CONFIG = {
    "default_tier": None,
    "tiers": [],
    "conversions": [{"event_name": "purchase", "base": {"fixed": "7"}, "end_user_reward": {"rate": "1"}}],
}
POINTS_PER_EVENT = 7
TIMESTAMP_MS = 1_700_000_000_000


@dataclass
class EngineHandle:
    url: str
    engine: Engine | None  # None when the URL came from the environment: it cannot be stopped here


_engines: dict[str, EngineHandle] = {}


def engine(name: str, env_name: str, starter, tmp_path_factory) -> EngineHandle:
    """The engine of `env_name` if the environment names one, else a local one started once per session
    (`rewards.devengines` stops it at exit); skips (fails under CI=true) if neither can be had."""
    if os.environ.get(env_name):
        return EngineHandle(os.environ[env_name], None)
    if name not in _engines:
        try:
            started = starter(tmp_path_factory.mktemp(name))
        except (EngineUnavailable, EngineFailed) as exc:
            message = f"{name} unavailable ({env_name} unset, no local engine): {str(exc).splitlines()[0]}"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
        _engines[name] = EngineHandle(started.url, started)
    return _engines[name]


def payout_config() -> PayoutConfig:
    from ingest_api.projects.service import parse_config

    return parse_config(CONFIG)


def conversions(project_id: str, batch: str, count: int) -> list[ConversionRecord]:
    """What `ingest_api.events.service` publishes for `count` purchases of distinct users."""
    return [
        ConversionRecord(
            project_id=project_id,
            batch_id=batch,
            dedup_id=f"{batch}-{i}",
            name="purchase",
            user_identifier=f"0x{i:040x}",
            user_identifier_type="evm_address",
            timestamp_ms=TIMESTAMP_MS,
            received_ms=TIMESTAMP_MS,
        )
        for i in range(count)
    ]


async def totals(warehouse, project_id: str) -> tuple[int, int]:
    """(conversion rows, points paid) of a project, as the query side reads them."""
    params = {"p": project_id}
    rows = await warehouse.query("SELECT count() AS n FROM conversions WHERE project_id = {p:String}", params)
    points = await warehouse.query(
        "SELECT sum(amount) AS s FROM point_totals_by_project WHERE project_id = {p:String}", params
    )
    return int(rows[0]["n"]), int(float(points[0]["s"] or 0)) if points else 0


class WorkerProcess:
    """`rewards workers` as a real process, on the embedded SQLite state of `data_dir` (shared by path)."""

    def __init__(self, data_dir: Path, env: dict[str, str], name: str = "worker"):
        self.log_path = data_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
        self.env = {
            **os.environ,
            "REWARDS_WORKER_STATE": "sqlite",
            "REWARDS_DATA_DIR": str(data_dir),
            "REWARDS_WORKER_SESSION_TIMEOUT_S": "6",  # the broker's floor: a killed worker's partitions move soon
            "REWARDS_LOG_FORMAT": "json",
            **env,
        }
        self.cwd = data_dir
        self.process: subprocess.Popen | None = None

    def start(self) -> "WorkerProcess":
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "rewards", "workers"], env=self.env, cwd=self.cwd, stdout=log, stderr=log
            )
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def assigned_partitions(self) -> set[int]:
        """The partitions of its latest assignment, as its consumer logged it."""
        lines = [line for line in self.log().splitlines() if "Setting newly assigned partitions" in line]
        return {int(p) for p in re.findall(r"partition=(\d+)", lines[-1])} if lines else set()

    def wait_for_log(self, text: str, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.log():
            assert self.process.poll() is None, f"worker exited ({self.process.returncode}):\n{self.log()[-3000:]}"
            assert time.monotonic() < deadline, (
                f"no {text!r} in the worker's log in {timeout_s} s:\n{self.log()[-3000:]}"
            )
            time.sleep(0.1)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int:
        self.terminate()
        return self.wait()

    def terminate(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self) -> int:
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.process.returncode


async def eventually(check, timeout_s: float = 30, every_s: float = 0.2):
    """Await `check()` until it stops raising AssertionError."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(every_s)


async def end_offsets(bootstrap: str) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    await consumer.start()
    try:
        return await consumer.end_offsets([TopicPartition(EVENTS_TOPIC, p) for p in range(PARTITIONS)])
    finally:
        await consumer.stop()


async def read_since(
    bootstrap: str, start: dict[TopicPartition, int], isolation_level: str, until: dict | None = None
) -> list:
    """Every message from `start` up to `until` (default: the current end), as a reader with `isolation_level`."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation_level, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(list(start))
        for tp, offset in start.items():
            consumer.seek(tp, offset)
        end = until or await consumer.end_offsets(list(start))
        messages = []
        while [tp for tp in start if await consumer.position(tp) < end[tp]]:
            for batch in (await consumer.getmany(timeout_ms=1000)).values():
                messages += batch
        return [m for m in messages if m.offset < end[TopicPartition(m.topic, m.partition)]]
    finally:
        await consumer.stop()


def drain_markers(project_id: str) -> list[dict]:
    """One event on each partition the project's conversions spread over (schemas.topics.shard_of: by user)."""
    settings = Settings()
    shards = min(settings.conversion_shards or settings.events_partitions, settings.events_partitions)
    markers, n = {}, 0
    while len(markers) < shards:
        user = f"0x{0xD0000 + n:040x}"
        markers.setdefault(
            shard_of(project_id, "evm_address", user, shards),
            {
                "name": "purchase",
                "user_identifier": user,
                "user_identifier_type": "evm_address",
                "dedup_id": f"drained-{n}",
            },
        )
        n += 1
    return list(markers.values())


async def new_topic(bootstrap: str, prefix: str = "test", partitions: int = 1) -> str:
    """A topic of a name of its own on the broker at `bootstrap`."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()
    return topic
