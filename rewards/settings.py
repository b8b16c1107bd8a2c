"""Configuration by environment variables (prefix REWARDS_), e.g. REWARDS_DATA_DIR=/var/lib/rewards.

The production shape's engines are found by their conventional variables (KAFKA_BOOTSTRAP_SERVERS,
REDIS_URL, CLICKHOUSE_URL); the REWARDS_-prefixed names work too.
"""

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _engine_url(name: str):
    return Field(None, validation_alias=AliasChoices(name, f"REWARDS_{name}"))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="REWARDS_", populate_by_name=True)

    data_dir: Path = Path("data")
    host: str = "127.0.0.1"
    port: int = 8000
    # Per-operation overrides of the contract's limits, e.g. '{"events_batch": "1000/minute"}'.
    rate_limits: dict[str, str] = {}
    max_body_bytes: int = 2 * 1024 * 1024
    log_level: str = "info"
    log_format: Literal["json", "console"] = "json"
    worker_poll_s: float = 0.5
    # This ingest process's identity, stable across its restarts (a pod name, a StatefulSet ordinal, a systemd
    # instance; default: the host name): its Kafka transactional ids derive from it, so a restarted process
    # fences its dead predecessor at once. Never the same for two live processes on different machines.
    ingest_instance: str | None = None

    # The production shape (all three set: `rewards ingest-api | workers | query-api | migrate`)
    kafka_bootstrap_servers: str | None = _engine_url("KAFKA_BOOTSTRAP_SERVERS")
    redis_url: str | None = _engine_url("REDIS_URL")
    clickhouse_url: str | None = _engine_url("CLICKHOUSE_URL")
    events_partitions: int = 12  # partitions of the events topic, created by `rewards migrate`
    kafka_replication_factor: int = 1
    producer_pool_size: int = 8  # transactional producers per ingest process (one transaction each at a time)
    worker_batch_size: int = 2000  # records per warehouse insert at most
    worker_batch_wait_s: float = 0.05  # how long a worker waits to fill a batch

    def require_engines(self) -> None:
        missing = [
            name
            for name, value in (
                ("KAFKA_BOOTSTRAP_SERVERS", self.kafka_bootstrap_servers),
                ("REDIS_URL", self.redis_url),
                ("CLICKHOUSE_URL", self.clickhouse_url),
            )
            if not value
        ]
        if missing:
            raise SystemExit(f"the production shape needs {', '.join(missing)} in the environment")
