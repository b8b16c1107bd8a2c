"""The StateStore contract, run against every adapter: SQLite (the reference) and Redis (a real local
redis-server, or REDIS_URL when set), and with `-m cluster` on a Redis Cluster too (tests.redis_cluster: a local
cluster of 3 masters, or REDIS_CLUSTER_URL). Each test works in a project of its own."""

import asyncio
import inspect
import os
from dataclasses import replace
from functools import partial

import pytest
import redis
from redis.crc import key_slot
from redis.exceptions import ConnectionError as RedisConnectionError

from rewards.devengines.process import EngineFailed, EngineUnavailable
from rewards.devengines.redis import start_redis
from rewards.domain import claim_checks as cc
from rewards.domain.payout_config import EMPTY_CONFIG, PayoutConfig, TokenCurrency
from rewards.domain.payouts import User
from rewards.domain.referrals import (
    AlreadyReferred,
    CodeNotFound,
    CodeUnavailable,
    InvalidReferral,
    MaxUsesBelowCurrent,
)
from rewards.embedded.sqlite_db import SqliteDatabase
from rewards.embedded.sqlite_state import SqliteStateStore
from rewards.errors import ApiError
from rewards.ports import Affiliate, StateStore
from rewards.production import redis_state
from rewards.production.redis_client import is_cluster
from rewards.production.redis_keys import ProjectKeys
from rewards.production.redis_state import BatchInFlight, RedisStateStore, open_redis_state
from schemas.records import load_records


class Boom(Exception):
    """What a failed publication inside a block raises."""


def user(n: int) -> User:
    return User(f"0x{n:040x}", "evm_address")


# -- fixtures ----------------------------------------------------------------------------------------


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
    return request.getfixturevalue(f"{request.param}_store")


@pytest.fixture
async def pid(store) -> str:
    return await store.create_project("contract")


@pytest.fixture(params=["redis", CLUSTER])
def redis_kind(request) -> str:
    return request.param


@pytest.fixture
def rstore(request, redis_kind) -> RedisStateStore:
    """The Redis store (the Redis-only tests), on one node and with `-m cluster` on a cluster."""
    return request.getfixturevalue(f"{redis_kind}_store")


@pytest.fixture
async def rpid(rstore) -> str:
    return await rstore.create_project("contract")


# -- projects and keys -------------------------------------------------------------------------------


async def test_keys_resolve_and_revoke(store, pid):
    key = await store.create_key(pid, ["service_role", "SendTrackingEvent", "service_role"])
    principal = await store.resolve_key(key)
    assert principal.project_id == pid and not principal.project_deleted
    assert principal.scopes == frozenset({"service_role", "SendTrackingEvent"})
    assert key.startswith(f"rk_{principal.key_id}_")
    assert await store.resolve_key(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    for malformed in ("", "rk_", "xx_abc_def", f"rk_{principal.key_id}_", "rk_ffffffffffffffff_secret"):
        assert await store.resolve_key(malformed) is None
    assert await store.revoke_key(key) is True
    assert await store.resolve_key(key) is None
    assert await store.revoke_key(key) is False


async def test_deleted_project(store, pid):
    key = await store.create_key(pid, [])
    assert await store.project_exists(pid)
    assert await store.delete_project(pid) is True
    assert await store.delete_project(pid) is False
    assert not await store.project_exists(pid)
    principal = await store.resolve_key(key)
    assert principal.project_deleted and principal.scopes == frozenset()
    assert await store.delete_project("0" * 32) is False
    assert not await store.project_exists("0" * 32)


async def test_config_round_trip(store, pid):
    assert await store.get_config(pid) == EMPTY_CONFIG
    config = PayoutConfig.model_validate(
        {
            "default_tier": "gold",
            "tiers": [{"id": "gold", "name": "Gold", "rank": 1, "rates": {"r1": 0.1, "r2": 0.05, "r3": 0, "r4": 0}}],
            "conversions": [{"event_name": "purchase", "base": {"rate_of": "value", "rate": "0.5"}}],
        }
    )
    await store.put_config(pid, config)
    assert await store.get_config(pid) == config
    await store.put_config(pid, EMPTY_CONFIG)
    assert await store.get_config(pid) == EMPTY_CONFIG


# -- affiliates --------------------------------------------------------------------------------------


def affiliate(n: int, **fields) -> Affiliate:
    u = user(n)
    defaults = dict(name="Ada", status="active", region="eu", audience=None, tax_status="missing", tier=None)
    return Affiliate(
        id=f"{u.identifier_type}:{u.identifier}", user=u, created_at_ms=1_700_000_000_000, **(defaults | fields)
    )


async def test_affiliates(store, pid):
    first = affiliate(1)
    async with store.create_affiliate(pid, first) as created:
        assert created.value is True
        [record] = load_records(created.payload)
        assert (record.type, record.project_id, record.id, record.name) == ("affiliate", pid, first.id, "Ada")
    assert await store.get_affiliate(pid, user(1)) == first
    async with store.create_affiliate(pid, affiliate(1, name="Other")) as created:
        assert (created.value, created.payload) == (False, None)
    assert await store.get_affiliate(pid, user(1)) == first
    assert await store.get_affiliate(pid, user(2)) is None
    assert await store.affiliates_among(pid, [user(2), user(1), user(1)]) == {user(1): first}
    assert await store.affiliates_among(pid, []) == {}


async def test_affiliate_undone_when_block_raises(store, pid):
    with pytest.raises(Boom):
        async with store.create_affiliate(pid, affiliate(3)) as created:
            assert created.value
            raise Boom
    assert await store.get_affiliate(pid, user(3)) is None
    async with store.create_affiliate(pid, affiliate(3, name=None, tier="gold")) as created:
        assert created.value
    assert (await store.get_affiliate(pid, user(3))).tier == "gold"


# -- referral codes ----------------------------------------------------------------------------------


async def create_codes(store, pid, owner: User, quantity: int = 1, max_uses: int | None = None) -> list[str]:
    async with store.create_codes(pid, owner, quantity, max_uses) as created:
        return [record.code for record in created.value]


async def test_codes_create_list_get(store, pid):
    async with store.create_codes(pid, user(1), 3, 2) as created:
        records = created.value
        assert len({r.code for r in records}) == 3
        [record] = load_records(created.payload)
        assert (record.type, record.codes, record.owner_identifier) == ("codes_created", [r.code for r in records],
                                                                        user(1).identifier)  # fmt: skip
        assert all(r.owner == user(1) and r.max_uses == 2 and r.current_uses == 0 and r.used_by == [] for r in records)
    later = await create_codes(store, pid, user(1), 2)
    codes = [r.code for r in records] + later
    page, count = await store.list_codes(pid, user(1), 0, 10)
    assert count == 5 and [r.code for r in page] == codes[::-1]
    assert page[0].max_uses is None and page[-1].max_uses == 2
    page, count = await store.list_codes(pid, user(1), 1, 2)
    assert count == 5 and [r.code for r in page] == codes[::-1][1:3]
    assert await store.list_codes(pid, user(1), 10, 10) == ([], 5)
    assert await store.list_codes(pid, user(2), 0, 10) == ([], 0)
    record = await store.get_code(pid, codes[0].lower())  # case-insensitive (ASCII), nothing else changed
    assert record == records[0]
    assert await store.get_code(pid, f" {codes[0]}") is None and await store.get_code(pid, f"{codes[0]}\n") is None
    assert await store.get_code(pid, "NOPE000") is None


async def test_codes_of(store, pid):
    mine = await create_codes(store, pid, user(1), 2)
    theirs = await create_codes(store, pid, user(2), 1)
    found = await store.codes_of(pid, [user(1), user(3), user(2), user(1)])
    assert found == {user(1): mine[::-1], user(2): theirs}
    assert await store.codes_of(pid, []) == {}


async def test_set_max_uses(store, pid):
    [code] = await create_codes(store, pid, user(1), 1, 5)
    async with store.use_code(pid, code, user(2), {}) as used:
        pass
    assert used.value[1].max_uses == 5 and load_records(used.payload)[0].max_uses == 5  # the workers hold uses to it
    assert (await store.set_max_uses(pid, code.lower(), None)).max_uses is None
    record = await store.set_max_uses(pid, code, 1)
    assert (record.max_uses, record.current_uses, record.available) == (1, 1, False)
    assert [u.identifier for u in record.used_by] == [user(2).identifier]
    with pytest.raises(MaxUsesBelowCurrent, match=r"current_uses \(1\)"):
        await store.set_max_uses(pid, code, 0)
    with pytest.raises(CodeNotFound):
        await store.set_max_uses(pid, "NOPE000", 3)
    assert (await store.get_code(pid, code)).max_uses == 1


async def test_codes_undone_when_block_raises(store, pid):
    with pytest.raises(Boom):
        async with store.create_codes(pid, user(1), 3, None) as created:
            codes = [r.code for r in created.value]
            raise Boom
    assert [await store.get_code(pid, code) for code in codes] == [None] * 3
    assert await store.list_codes(pid, user(1), 0, 10) == ([], 0)
    assert await store.codes_of(pid, [user(1)]) == {}


async def test_use_code(store, pid):
    [code] = await create_codes(store, pid, user(1), 1, 2)
    async with store.use_code(pid, code.lower(), user(2), {"signature": "0xsig", "chain_id": 1}) as used:
        record, use = used.value
        assert load_records(used.payload) == [use]
        assert (record.code, record.current_uses, record.remaining_uses) == (code, 1, 1)
        assert [(u.identifier, u.identifier_type) for u in record.used_by] == [(user(2).identifier, "evm_address")]
        assert (use.code, use.owner_identifier, use.user_identifier) == (code, user(1).identifier, user(2).identifier)
        assert use.project_id == pid and use.used_at_ms == record.used_by[0].used_at_ms
    referral = await store.referral_of(pid, user(2))
    assert (referral.code, referral.referrer, referral.referred_at_ms) == (code, user(1), use.used_at_ms)
    assert await store.referral_of(pid, user(1)) is None
    assert await store.get_code(pid, code) == record


async def test_use_code_errors(store, pid):
    [code] = await create_codes(store, pid, user(1), 1, 1)
    with pytest.raises(CodeNotFound):
        async with store.use_code(pid, "NOPE000", user(2), {}):
            pass
    with pytest.raises(InvalidReferral, match="own"):
        async with store.use_code(pid, code, user(1), {}):
            pass
    async with store.use_code(pid, code, user(2), {}):
        pass
    with pytest.raises(CodeUnavailable):
        async with store.use_code(pid, code, user(3), {}):
            pass
    [other] = await create_codes(store, pid, user(4))
    with pytest.raises(AlreadyReferred):
        async with store.use_code(pid, other, user(2), {}):
            pass
    [of_two] = await create_codes(store, pid, user(2))
    with pytest.raises(InvalidReferral, match="cycle"):  # 2 was referred by 1: 1 may not be referred by 2
        async with store.use_code(pid, of_two, user(1), {}):
            pass
    assert (await store.get_code(pid, of_two)).current_uses == 0
    assert await store.referral_of(pid, user(1)) is None


async def test_use_code_undone_when_block_raises(store, pid):
    [code] = await create_codes(store, pid, user(1), 1, 1)
    with pytest.raises(Boom):
        async with store.use_code(pid, code, user(2), {}) as used:
            assert used.value[0].current_uses == 1
            raise Boom
    record = await store.get_code(pid, code)
    assert (record.current_uses, record.used_by, record.available) == (0, [], True)
    assert await store.referral_of(pid, user(2)) is None
    async with store.use_code(pid, code, user(3), {}) as used:
        assert [u.identifier for u in used.value[0].used_by] == [user(3).identifier]


async def test_concurrent_uses_never_exceed_max_uses(store, pid):
    [code] = await create_codes(store, pid, user(1), 1, 3)

    async def use(n: int) -> bool:
        try:
            async with store.use_code(pid, code, user(n), {}):
                await asyncio.sleep(0)
        except CodeUnavailable:
            return False
        return True

    results = await asyncio.gather(*(use(n) for n in range(10, 22)))
    assert sum(results) == 3
    record = await store.get_code(pid, code)
    assert record.current_uses == 3 and len(record.used_by) == 3


async def test_crossing_uses_make_no_cycle(store, pid):
    [of_one], [of_two] = await create_codes(store, pid, user(1)), await create_codes(store, pid, user(2))

    async def use(code: str, n: int) -> str:
        try:
            async with store.use_code(pid, code, user(n), {}):
                return "used"
        except InvalidReferral as exc:
            return str(exc)

    results = await asyncio.gather(use(of_one, 2), use(of_two, 1))
    assert sorted(results) == ["Using this code would create a referral cycle", "used"]


async def refer(store, pid, referrer: User, referred: User) -> None:
    [code] = await create_codes(store, pid, referrer)
    async with store.use_code(pid, code, referred, {}):
        pass


async def chain(store, pid, of: User, depth: int) -> list[User]:
    return (await store.referrer_chains(pid, [of], depth))[of]


async def test_referrer_chain(store, pid):
    for n in range(1, 6):  # 1 referred 2, 2 referred 3, … 5 referred 6
        await refer(store, pid, user(n), user(n + 1))
    assert await chain(store, pid, user(6), 4) == [user(5), user(4), user(3), user(2)]
    assert await chain(store, pid, user(6), 10) == [user(n) for n in range(5, 0, -1)]
    assert await chain(store, pid, user(3), 4) == [user(2), user(1)]
    assert await chain(store, pid, user(6), 0) == []
    assert await chain(store, pid, user(1), 4) == []
    assert await chain(store, pid, user(99), 4) == []
    many = await store.referrer_chains(pid, [user(6), user(3), user(99), user(3)], 2)
    assert many == {user(6): [user(5), user(4)], user(3): [user(2), user(1)], user(99): []}
    assert await store.referrer_chains(pid, [], 4) == {}
    [top_code] = await create_codes(store, pid, user(6))
    with pytest.raises(InvalidReferral, match="cycle"):  # 1 is 5 levels above 6
        async with store.use_code(pid, top_code, user(1), {}):
            pass
    await refer(store, pid, user(6), user(7))  # a new user below stays allowed
    assert await chain(store, pid, user(7), 2) == [user(6), user(5)]


# -- events ------------------------------------------------------------------------------------------


def batch(*ids: str, name: str = "purchase") -> tuple[list[str], list[tuple[User, str]]]:
    return list(ids), [(user(int(i.split("-")[-1]) % 50 + 1), name) for i in ids]


async def ingest(store, pid, ids: list[str], users_and_names, idempotency=None, body: bytes = b'{"ok":1}'):
    async with store.ingest(pid, ids, users_and_names, idempotency) as claim:
        if claim.replay is None:
            claim.respond(body)
        return claim


async def test_ingest_fresh_and_duplicates(store, pid):
    claim = await ingest(store, pid, *batch("e-1", "e-2", "e-3"))
    assert (claim.replay, claim.fresh) == (None, [0, 1, 2])
    assert (await ingest(store, pid, *batch("e-2", "e-4", "e-1", "e-5"))).fresh == [1, 3]
    assert (await ingest(store, pid, *batch("e-6", "e-6", "e-2", "e-6"))).fresh == [0]
    assert (await ingest(store, pid, *batch("e-1", "e-2"))).fresh == []
    assert [await store.event_status(pid, i) for i in ("e-1", "e-5", "e-6", "e-7")] == ["accepted"] * 3 + [None]


async def test_has_event(store, pid):
    assert not await store.has_event(pid, user(2), "signup")
    await ingest(store, pid, *batch("u-1", name="signup"))
    assert await store.has_event(pid, user(2), "signup")
    assert not await store.has_event(pid, user(2), "purchase")
    assert not await store.has_event(pid, user(3), "signup")


async def test_event_status_through_processed(store, pid):
    await ingest(store, pid, *batch("p-1", "p-2"))
    await store.mark_processed(pid, ["p-1", "p-9"])
    await store.mark_processed(pid, [])
    statuses = [await store.event_status(pid, i) for i in ("p-1", "p-2", "p-9")]
    assert statuses == ["processed", "accepted", None]
    assert (await ingest(store, pid, *batch("p-1", "p-9"))).fresh == [1]
    assert await store.event_status(pid, "p-1") == "processed"
    assert await store.processed_among(pid, ["p-1", "p-2", "p-9", "nope"]) == {"p-1"}
    assert await store.processed_among(pid, []) == set()


async def test_an_event_set_aside_is_failed_and_stays_known(store, pid):
    await ingest(store, pid, *batch("f-1", "f-2"))
    await store.mark_failed(pid, ["f-1", "f-9"])
    await store.mark_failed(pid, [])
    assert [await store.event_status(pid, i) for i in ("f-1", "f-2", "f-9")] == ["failed", "accepted", None]
    assert (await ingest(store, pid, *batch("f-1", "f-3"))).fresh == [1]  # still a duplicate
    assert await store.processed_among(pid, ["f-1", "f-2"]) == {"f-1"}  # published again: not handled twice


async def test_idempotent_replay_and_conflict(store, pid):
    first = await ingest(store, pid, *batch("i-1", "i-2"), ("key-1", "hash-a"), b'{"ingested_events":2}')
    assert first.fresh == [0, 1]
    replay = await ingest(store, pid, *batch("i-1", "i-2"), ("key-1", "hash-a"))
    assert (replay.replay, replay.fresh) == (b'{"ingested_events":2}', [])
    with pytest.raises(ApiError) as raised:
        await ingest(store, pid, *batch("i-3"), ("key-1", "hash-b"))
    assert raised.value.status == 409
    assert await store.event_status(pid, "i-3") is None
    other_project = await store.create_project("other")  # keys are per project
    assert (await ingest(store, other_project, *batch("i-1"), ("key-1", "hash-b"))).fresh == [0]


async def test_idempotency_key_without_response_is_not_kept(store, pid):
    async with store.ingest(pid, *batch("n-1"), ("key-n", "hash-a")) as claim:
        assert claim.fresh == [0]
    assert (await ingest(store, pid, *batch("n-2"), ("key-n", "hash-b"))).fresh == [0]


async def test_ingest_undone_when_block_raises(store, pid):
    await ingest(store, pid, *batch("r-1"))
    with pytest.raises(Boom):
        async with store.ingest(pid, *batch("r-1", "r-2", "r-3", name="deposit"), ("key-r", "hash-a")) as claim:
            assert claim.fresh == [1, 2]
            raise Boom
    assert [await store.event_status(pid, i) for i in ("r-1", "r-2", "r-3")] == ["accepted", None, None]
    assert not await store.has_event(pid, user(3), "deposit")
    claim = await ingest(store, pid, *batch("r-1", "r-2", "r-3"), ("key-r", "hash-b"))
    assert claim.fresh == [1, 2]


# -- claim checks ------------------------------------------------------------------------------------

USDC = TokenCurrency(address="0x" + "c" * 40, chain_id=8453, name="USDC", decimals=6)


def check(pid: str, n: int, owner: User) -> cc.ClaimCheck:
    return cc.ClaimCheck(
        id=cc.check_id(pid, f"payout-{n}"), user=owner, currency=USDC, amount=1_000_000 * n,
        reason="end_user_payout", status=cc.OPEN, hash=None, source_id=f"e-{n}", created_ms=1_700_000_000_000 + n,
        claimed_ms=None, version=1,
    )  # fmt: skip


async def current(store, pid, ids: list[str]) -> list[cc.ClaimCheck]:
    async with store.update_claim_checks(pid, ids, lambda c: c, None) as checks:
        return checks.value


async def test_claim_checks_register_and_update(store, pid):
    a, b = check(pid, 1, user(1)), check(pid, 2, user(1))
    await store.register_claim_checks(pid, [a, b])
    await store.register_claim_checks(pid, [])
    assert await current(store, pid, [a.id, b.id]) == [a, b]
    async with store.update_claim_checks(pid, [a.id, b.id], cc.close, user(1)) as closed:
        assert [(c.status, c.version) for c in closed.value] == [(cc.CLOSED, 2)] * 2
        assert load_records(closed.payload) == [cc.to_record(pid, c) for c in closed.value]
    await store.register_claim_checks(pid, [a, check(pid, 3, user(2))])  # a known check is left as it is
    assert (await current(store, pid, [a.id]))[0].status == cc.CLOSED
    claim = partial(cc.claim, tx_hash="0xabc", claimed_ms=1_800_000_000_000)
    async with store.update_claim_checks(pid, [a.id], claim, None) as change:
        claimed = change.value
        assert (claimed[0].status, claimed[0].hash, claimed[0].claimed_ms, claimed[0].version) == (
            cc.CLAIMED, "0xabc", 1_800_000_000_000, 3,
        )  # fmt: skip
    async with store.update_claim_checks(pid, [a.id], claim, None) as again:
        assert again.value == claimed
    assert await current(store, pid, []) == []


async def test_claim_checks_all_or_none(store, pid):
    a, b, theirs = check(pid, 1, user(1)), check(pid, 2, user(1)), check(pid, 3, user(2))
    await store.register_claim_checks(pid, [a, b, theirs])
    with pytest.raises(cc.ClaimCheckNotFound, match="cc_missing"):
        async with store.update_claim_checks(pid, [a.id, "cc_missing"], cc.close, user(1)):
            pass
    with pytest.raises(cc.ClaimCheckNotFound, match=theirs.id):
        async with store.update_claim_checks(pid, [a.id, theirs.id], cc.close, user(1)):
            pass
    with pytest.raises(cc.ClaimCheckConflict, match="only closed"):
        async with store.update_claim_checks(pid, [a.id, b.id], partial(cc.claim, tx_hash="0x1", claimed_ms=1), None):
            pass
    assert await current(store, pid, [a.id, b.id, theirs.id]) == [a, b, theirs]
    other = await store.create_project("other")
    with pytest.raises(cc.ClaimCheckNotFound):
        await current(store, other, [a.id])


async def test_claim_checks_undone_when_block_raises(store, pid):
    a, b = check(pid, 1, user(1)), check(pid, 2, user(1))
    await store.register_claim_checks(pid, [a, b])
    async with store.update_claim_checks(pid, [b.id], cc.close, None):
        pass
    with pytest.raises(Boom):
        async with store.update_claim_checks(pid, [a.id, b.id], cc.close, user(1)) as closed:
            assert [c.status for c in closed.value] == [cc.CLOSED, cc.CLOSED]
            raise Boom
    assert await current(store, pid, [a.id, b.id]) == [a, replace(b, status=cc.CLOSED, version=2)]


# -- Redis only --------------------------------------------------------------------------------------


def test_redis_store_has_every_method_of_the_port():
    port_methods = [name for name in vars(StateStore) if not name.startswith("_")]
    assert "ingest" in port_methods and "project_exists" in dir(RedisStateStore)
    for name in port_methods:
        expected = list(inspect.signature(getattr(StateStore, name)).parameters)
        assert list(inspect.signature(getattr(RedisStateStore, name)).parameters) == expected, name


def test_project_keys_share_one_cluster_slot():
    k = ProjectKeys("0123456789abcdef0123456789abcdef")
    keys = [
        k.project(), k.config(), k.affiliates(), k.code_seq(), k.code("ABC1234"), k.code_uses("ABC1234"),
        k.owner_codes(User("a:{b}", "email")), k.referrals(), k.dedup("{x}:y"), k.user_events(user(1)),
        k.idempotency("}{"), k.claim_check("cc_1"), k.outbox(), k.outbox_records(),
    ]  # fmt: skip
    assert len({key_slot(key.encode()) for key in keys}) == 1
    assert len(set(keys)) == len(keys)


async def test_pending_claims_read_as_not_found_and_expire(rstore, rpid, monkeypatch):
    monkeypatch.setattr(redis_state, "PENDING_TTL_S", 0.2)
    stalled = rstore.ingest(rpid, *batch("x-1", "x-2"), ("key-x", "hash-a"))
    assert (await stalled.__aenter__()).fresh == [0, 1]
    assert await rstore.event_status(rpid, "x-1") is None
    await asyncio.sleep(0.3)
    retry = rstore.ingest(rpid, *batch("x-1", "x-2"), ("key-x", "hash-a"))
    claim = await retry.__aenter__()
    assert claim.fresh == [0, 1]
    failure = Boom()  # the stalled request fails at last: its undo must spare the retry's claims
    assert await stalled.__aexit__(Boom, failure, None) is False
    claim.respond(b"{}")
    await retry.__aexit__(None, None, None)
    assert [await rstore.event_status(rpid, i) for i in ("x-1", "x-2")] == ["accepted"] * 2
    assert (await ingest(rstore, rpid, *batch("x-1"), ("key-x", "hash-a"))).replay == b"{}"


async def test_overlapping_batch_in_flight(rstore, rpid):
    async with rstore.ingest(rpid, *batch("f-1", "f-2"), ("key-f", "hash-a")) as first:
        assert first.fresh == [0, 1]
        with pytest.raises(BatchInFlight) as raised:
            await ingest(rstore, rpid, *batch("f-3", "f-2", "f-1"))
        assert raised.value.dedup_ids == ["f-2", "f-1"]
        with pytest.raises(BatchInFlight):  # the same Idempotency-Key, still in flight
            await ingest(rstore, rpid, *batch("f-4"), ("key-f", "hash-a"))
        assert await rstore.event_status(rpid, "f-3") is None
        first.respond(b"first")
    assert (await ingest(rstore, rpid, *batch("f-3", "f-2", "f-1"))).fresh == [0]
    assert (await ingest(rstore, rpid, *batch("f-4"), ("key-f", "hash-a"))).replay == b"first"


async def test_concurrent_ingest_accepts_each_id_once(rstore, rpid):
    ids = [f"c-{n}" for n in range(40)]
    accepted: list[str] = []

    async def send(order: list[str]) -> None:
        while True:
            try:
                async with rstore.ingest(rpid, *batch(*order), None) as claim:
                    await asyncio.sleep(0.005)  # the publication
                    accepted.extend(order[i] for i in claim.fresh)
                    return
            except BatchInFlight:
                await asyncio.sleep(0.001)

    await asyncio.gather(*(send(ids[n:] + ids[:n]) for n in range(0, 40, 8)))
    assert sorted(accepted) == sorted(ids)


async def test_use_code_rechecks_what_changed_after_its_check(rstore, rpid, monkeypatch):
    [of_one], [of_two] = await create_codes(rstore, rpid, user(1)), await create_codes(rstore, rpid, user(2))
    read_chains, raced = rstore.referrer_chains, []

    async def chains_then_race(project_id, users, depth):
        chains = await read_chains(project_id, users, depth)
        if not raced:  # between the check and the write, 1 becomes referred by 2
            raced.append(True)
            async with rstore.use_code(rpid, of_two, user(1), {}):
                pass
        return chains

    monkeypatch.setattr(rstore, "referrer_chains", chains_then_race)
    with pytest.raises(InvalidReferral, match="cycle"):
        async with rstore.use_code(rpid, of_one, user(2), {}):
            pass
    assert raced and (await rstore.get_code(rpid, of_one)).current_uses == 0
    assert await rstore.referral_of(rpid, user(2)) is None


async def test_claim_check_update_retries_after_a_concurrent_change(rstore, rpid, request, redis_kind):
    a = check(rpid, 1, user(1))
    await rstore.register_claim_checks(rpid, [a])
    attempts = []

    def close_after_a_concurrent_close(c: cc.ClaimCheck) -> cc.ClaimCheck:
        if not attempts:  # another instance closes the check between our read and our write
            with _other_client(request, redis_kind) as other:
                other.set(ProjectKeys(rpid).claim_check(a.id), cc.to_record(rpid, cc.close(c)).model_dump_json())
        attempts.append(c.status)
        return cc.close(c)

    async with rstore.update_claim_checks(rpid, [a.id], close_after_a_concurrent_close, None) as closed:
        assert (closed.value[0].status, closed.value[0].version) == (cc.CLOSED, 2)
    assert attempts == [cc.OPEN, cc.CLOSED]


def _other_client(request, redis_kind: str):
    """A synchronous client of the store's Redis (another instance of the service, say)."""
    if redis_kind == "cluster":
        return redis.RedisCluster.from_url(request.getfixturevalue("redis_cluster_url"))
    return redis.Redis.from_url(request.getfixturevalue("redis_url"))


def reply_lost(apply):
    async def call(*args, **kwargs):
        await apply(*args, **kwargs)
        raise RedisConnectionError("Connection reset by peer")

    return call


async def test_a_change_whose_reply_is_lost_is_undone(rstore, rpid, monkeypatch):
    [code] = await create_codes(rstore, rpid, user(1), 1, 1)
    scripts = rstore._scripts
    lossy = replace(
        scripts,
        use_code=reply_lost(scripts.use_code),
        claim_batch=reply_lost(scripts.claim_batch),
        create_affiliate=reply_lost(scripts.create_affiliate),
    )
    monkeypatch.setattr(rstore, "_scripts", lossy)
    with pytest.raises(RedisConnectionError):
        async with rstore.use_code(rpid, code, user(2), {}):
            pass
    with pytest.raises(RedisConnectionError):
        await ingest(rstore, rpid, *batch("l-1"), ("key-l", "hash-a"))
    with pytest.raises(RedisConnectionError):
        async with rstore.create_affiliate(rpid, affiliate(1)):
            pass
    monkeypatch.undo()
    record = await rstore.get_code(rpid, code)
    assert (record.current_uses, record.used_by, await rstore.referral_of(rpid, user(2))) == (0, [], None)
    assert (await ingest(rstore, rpid, *batch("l-1"), ("key-l", "hash-a"))).fresh == [0]
    assert await rstore.get_affiliate(rpid, user(1)) is None
    assert await rstore._redis.zcard(ProjectKeys(rpid).outbox()) == 0  # the undo took the entries too


async def test_processed_while_pending_stays_processed(rstore, rpid):
    async with rstore.ingest(rpid, *batch("w-1", "w-2"), None):
        await rstore.mark_processed(rpid, ["w-1"])  # a fast worker, before the commit
    assert [await rstore.event_status(rpid, i) for i in ("w-1", "w-2")] == ["processed", "accepted"]


async def test_failed_while_pending_stays_failed(rstore, rpid):
    async with rstore.ingest(rpid, *batch("x-1"), None):
        await rstore.mark_failed(rpid, ["x-1"])
    assert await rstore.event_status(rpid, "x-1") == "failed"
