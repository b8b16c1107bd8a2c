"""The adapters under contract (the `store` fixture's parameters) and what the contract modules share."""

import inspect
import os

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from rewards.adapters.embedded.sqlite_db import SqliteDatabase
from rewards.adapters.embedded.sqlite_state import SqliteStateStore
from rewards.adapters.production.redis_client import is_cluster
from rewards.adapters.production.redis_state import open_redis_state
from rewards.devengines.process import EngineFailed, EngineUnavailable
from rewards.devengines.redis import start_redis
from rewards.domain import claim_checks as cc
from rewards.domain.payout_config import TokenCurrency
from rewards.domain.payouts import User
from rewards.ports import Affiliate, IngestClaim, IngestStore, ProjectStore, ReferralStore


class Boom(Exception):
    """What a failed publication inside a block raises."""


def user(n: int) -> User:
    return User(f"0x{n:040x}", "evm_address")


def port_methods(port: type) -> list[str]:
    """The methods of a port, those of the ports it joins included."""
    return [name for cls in port.__mro__ for name in vars(cls) if not name.startswith("_")]


def assert_implements(adapter: type, port: type) -> None:
    """The adapter has every method of the port, with the same parameters."""
    for name in port_methods(port):
        expected = list(inspect.signature(getattr(port, name)).parameters)
        assert list(inspect.signature(getattr(adapter, name)).parameters) == expected, name


# -- the adapters ------------------------------------------------------------------------------------


def _unavailable(reason: str):
    line = reason.strip().splitlines()[0] if reason.strip() else "unknown reason"
    if os.environ.get("CI") == "true":
        pytest.fail(f"Redis is required in CI: {line}")
    pytest.skip(f"Redis unavailable, Redis contract tests skipped: {line}")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    if os.environ.get("REDIS_URL"):
        yield os.environ["REDIS_URL"]
        return
    try:
        engine = start_redis(tmp_path_factory.mktemp("redis"))
    except (EngineUnavailable, EngineFailed) as exc:
        _unavailable(str(exc))
    yield engine.url
    engine.stop()


@pytest.fixture(scope="session")
async def sqlite_store(tmp_path_factory):
    store = SqliteStateStore(SqliteDatabase(tmp_path_factory.mktemp("state") / "state.sqlite3"))
    yield store
    await store.close()


@pytest.fixture(scope="session")
async def redis_store(redis_url):
    try:
        store = await open_redis_state(redis_url)
    except (RedisConnectionError, OSError) as exc:
        _unavailable(f"{redis_url} does not answer: {exc}")
    yield store
    await store.close()


@pytest.fixture(scope="session")
async def cluster_store(redis_cluster_url):
    store = await open_redis_state(redis_cluster_url)
    assert is_cluster(store._redis)  # found by REDIS_CLUSTER's default, auto
    yield store
    await store.close()


CLUSTER = pytest.param("cluster", marks=pytest.mark.cluster)


@pytest.fixture(params=["sqlite", "redis", CLUSTER])
def store(request):
    """The adapter under contract: a whole StateStore; each contract module uses one of its ports."""
    return request.getfixturevalue(f"{request.param}_store")


@pytest.fixture
async def pid(store: ProjectStore) -> str:
    return await store.create_project("contract")


@pytest.fixture
async def other_pid(store: ProjectStore) -> str:
    """A second project: nothing crosses from one project to another."""
    return await store.create_project("other")


# -- what the contracts build ------------------------------------------------------------------------


def affiliate(n: int, **fields) -> Affiliate:
    u = user(n)
    defaults = dict(name="Ada", status="active", region="eu", audience=None, tax_status="missing", tier=None)
    return Affiliate(
        id=f"{u.identifier_type}:{u.identifier}", user=u, created_at_ms=1_700_000_000_000, **(defaults | fields)
    )


async def create_codes(
    store: ReferralStore, pid: str, owner: User, quantity: int = 1, max_uses: int | None = None
) -> list[str]:
    async with store.create_codes(pid, owner, quantity, max_uses) as created:
        return [record.code for record in created.value]


def batch(*ids: str, name: str = "purchase") -> tuple[list[str], list[tuple[User, str]]]:
    return list(ids), [(user(int(i.split("-")[-1]) % 50 + 1), name) for i in ids]


async def ingest(
    store: IngestStore, pid, ids: list[str], users_and_names, idempotency=None, body: bytes = b'{"ok":1}'
) -> IngestClaim:
    async with store.ingest(pid, ids, users_and_names, idempotency) as claim:
        if claim.replay is None:
            claim.respond(body)
        return claim


USDC = TokenCurrency(address="0x" + "c" * 40, chain_id=8453, name="USDC", decimals=6)


def check(pid: str, n: int, owner: User) -> cc.ClaimCheck:
    return cc.ClaimCheck(
        id=cc.check_id(pid, f"payout-{n}"), user=owner, currency=USDC, amount=1_000_000 * n,
        reason="end_user_payout", status=cc.OPEN, hash=None, source_id=f"e-{n}", created_ms=1_700_000_000_000 + n,
        claimed_ms=None, version=1,
    )  # fmt: skip
