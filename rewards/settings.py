"""Configuration by environment variables (prefix REWARDS_), e.g. REWARDS_DATA_DIR=/var/lib/rewards."""

from pathlib import Path
from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="REWARDS_")

    data_dir: Path = Path("data")
    host: str = "127.0.0.1"
    port: int = 8000
    # Per-operation overrides of the contract's limits, e.g. '{"events_batch": "1000/minute"}'.
    rate_limits: dict[str, str] = {}
    max_body_bytes: int = 2 * 1024 * 1024
    log_level: str = "info"
    log_format: Literal["json", "console"] = "json"
    worker_poll_s: float = 0.5
