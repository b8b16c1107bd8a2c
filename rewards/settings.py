"""Configuration by environment variables (prefix REWARDS_), e.g. REWARDS_DATA_DIR=/var/lib/rewards.

The production shape's engines are found by their conventional variables (KAFKA_BOOTSTRAP_SERVERS,
REDIS_URL, CLICKHOUSE_URL); the REWARDS_-prefixed names work too.
"""

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, BeforeValidator, Field, SecretStr
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*")


def parse_duration(value: object) -> float:
    """A duration in seconds, from seconds (a number) or a text like `35d`, `6h`, `90m`, `30s`, `500ms`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = _DURATION.fullmatch(str(value))
        if match is None:
            raise ValueError(f"not a duration: {value!r} (e.g. 35d, 6h, 90m, 30s, 500ms, or seconds)")
        seconds = float(match[1]) * _UNITS[match[2] or "s"]
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]


def _comma_separated(value: object) -> object:
    return tuple(part.strip() for part in value.split(",") if part.strip()) if isinstance(value, str) else value


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
    log_format: Literal["auto", "json", "console"] = "auto"  # auto: console lines on a terminal, JSON otherwise
    worker_poll_s: float = 0.5
    # How often the ingest edge expires claim checks past their claim_check_expiry (API.md §8).
    claim_expiry_sweep_s: float = Field(60.0, gt=0, le=3600)
    # Erasure rounds (API.md §11; stream_workers.erasures): the least time from one round to the next in a process
    # (each holds the writers; None: 5 s in `rewards serve`, 300 s in a production worker process), and how long a
    # production round waits before reading the log's ends, so that a change published by the edge while it began is
    # in them (an edge's publish, or its outbox relay's, within OUTBOX_DUE_S).
    erasure_round_gap_s: float | None = Field(None, ge=0, le=86400)
    erasure_publish_grace_s: float = Field(35.0, ge=0, le=600)
    # A production worker's lease on writing a delivery (renewed every third of it): how long a worker that died
    # mid-write holds an erasure round back (rewards.adapters.production.writer_hold).
    worker_lease_s: float = Field(60.0, gt=0, le=3600)
    # How long a dedup_id is remembered (API.md §3): seen again after this, it is a new event. Also bounds
    # `GET /events/status?user_identifier…` (a user's event names are kept as long). Seconds or `35d`, `12h`.
    dedup_window: Duration = 35 * 86400.0
    # Idempotency-Key records are kept this long (both shapes).
    idempotency_ttl: Duration = 24 * 3600.0
    # Production: how long Redis keeps a dedup_id once processed; past it the warehouse (`dedup_ids`) answers
    # until the window ends. An accepted id stays in Redis until processed (the workers' lag costs nothing
    # here: the warehouse has the id before Redis starts this countdown). Capped at the window.
    dedup_hot_window: Duration = 600.0
    # Tracking events (API.md §7): how long a tracking id stays bound to the referral code a pageview named (from
    # its last such pageview) and to the user a connect_wallet named (from the last one). Both shapes.
    attribution_window: Duration = 30 * 86400.0

    # The production shape (all three set: `rewards ingest-api | workers | query-api | migrate`)
    kafka_bootstrap_servers: str | None = _engine_url("KAFKA_BOOTSTRAP_SERVERS")
    redis_url: str | None = _engine_url("REDIS_URL")
    # `true`: REDIS_URL names one node of a Redis Cluster; `false`: a single node; `auto`: ask the node once at
    # start-up (INFO cluster). rewards.adapters.production.redis_client.
    redis_cluster: Literal["auto", "true", "false"] = Field(
        "auto", validation_alias=AliasChoices("REDIS_CLUSTER", "REWARDS_REDIS_CLUSTER")
    )
    clickhouse_url: str | None = _engine_url("CLICKHOUSE_URL")
    # A ClickHouse cluster (unset: CLICKHOUSE_URL's server holds the whole warehouse). Each table is then `<t>_local`
    # on every shard plus `<t>`, Distributed over them by project (schemas/clickhouse/layout.py), and `rewards
    # migrate` creates them on every node: on each of CLICKHOUSE_NODES (every node's HTTP URL, comma-separated; the
    # declared MergeTree engines), or with CLICKHOUSE_REPLICATED once with ON CLUSTER (Replicated engines; Keeper).
    # Only `rewards migrate` needs these: the other processes read and write the plain names through any node.
    clickhouse_cluster: str | None = None
    clickhouse_nodes: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_comma_separated)] = ()
    clickhouse_replicated: bool = False
    # Inserts as ClickHouse's async inserts, waited for (visible when they return, deduplicated by their token, views
    # too): the server gathers the concurrent deliveries' inserts of a table for up to this many ms and feeds the
    # table's views once for them all. 0: plain inserts. See docs/benchmarks.md, "Freshness".
    clickhouse_async_insert_ms: int = Field(default=0, ge=0, le=1000)
    events_partitions: int = 12  # partitions of the events topic, created by `rewards migrate`
    # How many of the events topic's partitions one project's conversions spread over, by user, from the project's own
    # partition on (schemas.topics): that many worker processes can share one project; a delivery then holds the
    # records of more projects, each costing its reads (docs/benchmarks.md). 0: all of them; 1: one partition.
    conversion_shards: int = Field(default=4, ge=0)
    # Replicas of every topic `rewards migrate` creates, and how many of them must have a write before the
    # broker acknowledges it (every producer sends acks=all): 3 and 2 on a production cluster, so that one
    # broker down stalls nothing for long and loses nothing. 1 and 1 fit a single broker (development).
    kafka_replication_factor: int = Field(1, ge=1)
    kafka_min_insync_replicas: int = Field(1, ge=1)
    producer_pool_size: int = 8  # transactional producers per ingest process (one transaction each at a time)
    # This ingest process's identity, stable across its restarts (a pod name, a StatefulSet ordinal, a systemd
    # instance; default: the host name): its Kafka transactional ids derive from it, so a restarted process
    # fences its dead predecessor at once. Never the same for two live processes on different machines.
    ingest_instance: str | None = None
    # Where ingest processes keep their index lock files (default: systemd's RUNTIME_DIRECTORY, else the temp dir).
    runtime_dir: Path | None = None
    # Records per warehouse insert at most: ClickHouse costs ~150 µs per event at 2,000, ~60 at 10,000 (the merges
    # of the parts each insert makes in every view), for ~75 MB more per worker process (docs/benchmarks.md).
    worker_batch_size: int = 10_000
    webhooks_group_id: str = "rewards-webhooks"  # the webhook dispatcher's Kafka consumer group (`rewards webhooks`)
    webhooks_metrics_port: int = 0  # REWARDS_WEBHOOKS_METRICS_PORT: `rewards webhooks` serves /metrics there (0: not)
    worker_group_id: str = "rewards-workers"  # the workers' Kafka consumer group (the ingest edge reads its lag)
    # Back-pressure: while more messages than this wait for the workers (Kafka's consumer lag, the embedded
    # outbox's rows; one per accepted batch), the events endpoints answer 503 with Retry-After (0: never).
    max_backlog: int = 20_000
    worker_batch_wait_s: float = 0.05  # how long a worker waits to fill a batch
    # Production HTTP services: a resolved API key is kept this long per process (seconds; 0: ask Redis on every
    # request). A revoked key or deleted project still reaches every process within 1 s (rewards.domain.keys.KeyCache).
    key_cache_ttl: float = Field(3.0, ge=0, le=60)
    # Web origins whose pages may call the API from a browser (CORS; comma-separated, `*`: any). The published client
    # runs in the page of the project's own site, sending the key in a header (no cookies), so any origin is the
    # default; an empty value turns cross-origin calls off.
    cors_origins: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_comma_separated)] = ("*",)
    # REWARDS_WEBHOOKS_ALLOW_PRIVATE=1 (development only): webhook URLs may be http:// and reach loopback and private
    # addresses (API.md §10); by default only https:// to public addresses.
    webhooks_allow_private: bool = False
    # An attempt's hold on a webhook delivery (seconds): a dispatcher that died mid-send leaves it to be tried again
    # after this. Longer than the sender's 10 s bound, or a slow receiver's attempt would be made twice meanwhile.
    webhooks_lease_s: float = Field(30.0, gt=0)
    # REWARDS_SECRETS_KEY: Fernet keys (comma-separated: the first seals, any opens) that encrypt secrets at rest, a
    # project's claim signer key (rewards.domain.sealing). Unset: secrets are stored as they are. SecretStr: a repr of
    # the settings never shows them.
    secrets_key: Annotated[tuple[SecretStr, ...], NoDecode, BeforeValidator(_comma_separated)] = ()

    @property
    def secrets_keys(self) -> tuple[str, ...]:
        return tuple(key.get_secret_value() for key in self.secrets_key)

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
