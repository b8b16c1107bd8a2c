"""The state of projects and their people moved from SQLite into Redis (runtime.moving.state_people): after the copy,
the Redis store answers every read of the moved project exactly as the SQLite store did, keeps the times to live the
store itself would have set, and behaves the same on the changes that rely on its indexes (a former code name taken,
the code sequence, a pending erasure asked again, an Idempotency-Key replayed). A second move is refused."""

import asyncio
import json
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from rewards.adapters.embedded.sqlite_db import SqliteDatabase
from rewards.adapters.embedded.sqlite_state import SqliteStateStore
from rewards.adapters.production import redis_keys
from rewards.adapters.production.redis_client import open_redis
from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_state import open_redis_state
from rewards.domain import claim_checks as cc
from rewards.domain import sealing
from rewards.domain.claim_signing import StoredSigner
from rewards.domain.payout_config import PayoutConfig
from rewards.domain.payouts import User
from rewards.domain.timestamps import now_ms
from rewards.settings import Settings
from runtime.moving import MoveRefused
from runtime.moving.state import copy_state
from tests.contract.support import affiliate, check, create_codes, ingest, redis_url, user  # noqa: F401 (fixture)

LONG = 3600.0  # a tracking binding's time to live
CONFIG = PayoutConfig.model_validate(
    {
        "default_tier": "gold",
        "tiers": [{"id": "gold", "name": "Gold", "rank": 1, "rates": {"r1": 0.1, "r2": 0.05, "r3": 0, "r4": 0}}],
    }
)
SECRETS_KEY = Fernet.generate_key().decode()  # the data dir's and production's (runtime.moving.state.check_sealed)
SIGNER = StoredSigner(address="0x" + "ab" * 20, sealed_key=sealing.seal(b"\x01" * 32, [SECRETS_KEY]))
SETTINGS = Settings(secrets_key=SECRETS_KEY)


@dataclass
class World:
    """What the SQLite store was filled with: the names the reads ask about."""

    pid: str = ""
    gone: str = ""  # a deleted project
    keys: dict[str, str] = field(default_factory=dict)
    codes: dict[str, str] = field(default_factory=dict)
    checks: list[str] = field(default_factory=list)
    erasures: dict[str, str] = field(default_factory=dict)
    users: list[User] = field(default_factory=lambda: [user(n) for n in (1, 2, 3, 10, 11, 12, 13, 20, 21, 30, 31, 32)])


async def _fill_projects(s: SqliteStateStore, w: World) -> None:
    w.pid, w.gone = await s.create_project("moving"), await s.create_project("gone")
    w.keys["live"] = await s.create_key(w.pid, ["ingest", "query"])
    w.keys["revoked"] = await s.create_key(w.pid, ["admin"])
    await s.revoke_key(w.keys["revoked"])
    w.keys["gone"] = await s.create_key(w.gone, ["query"])
    w.keys["wrong"] = w.keys["live"][:-2] + ("AA" if not w.keys["live"].endswith("AA") else "BB")
    await s.delete_project(w.gone)
    await s.put_config(w.pid, CONFIG)
    await s.put_claim_signer(w.pid, SIGNER)
    for a in (affiliate(1), affiliate(2, name=None, tier="gold", region=None)):
        async with s.create_affiliate(w.pid, a):
            pass


async def _fill_codes(s: SqliteStateStore, w: World) -> None:
    pid = w.pid
    w.codes["two_uses"], w.codes["spare"] = await create_codes(s, pid, user(1), 2, max_uses=2)
    (w.codes["of_2"],) = await create_codes(s, pid, user(2))
    async with s.create_affiliate_code(pid, user(1), "Ada", Decimal("0.15"), {"signature": "0xa"}):
        pass
    for name in ("Ada_Two", "ada_three"):
        async with s.rename_affiliate_code(pid, user(1), name, {"signature": f"0x{name}"}):
            pass
    await s.set_rebate_rate(pid, user(1), "ADA", Decimal("0.2500"), {"signature": "0xrate"})
    w.codes.update(affiliate="ADA_THREE", former="ADA", former_2="ADA_TWO")
    for code, used_by in (("of_2", 1), ("two_uses", 10), ("former", 11), ("two_uses", 12)):
        async with s.use_code(pid, w.codes[code], user(used_by), {"signature": f"0x{used_by}", "message": "hi"}):
            pass
    async with s.remove_referral(pid, user(12), w.codes["two_uses"], user(1)):
        pass


async def _fill_events(s: SqliteStateStore, w: World) -> None:
    pid = w.pid
    await ingest(s, pid, ["e-1", "e-2", "e-3"], [(user(10), "purchase"), (user(10), "signup"), (user(11), "purchase")],
                 ("idem-1", "hash-1"), b'{"accepted":3}')  # fmt: skip
    await ingest(s, pid, ["e-4"], [(user(12), "purchase")])
    await s.mark_processed(pid, ["e-1"])
    await s.mark_failed(pid, ["e-2"])


async def _fill_checks(s: SqliteStateStore, w: World) -> None:
    pid, now = w.pid, now_ms()
    checks = [check(pid, n, user(1 + n % 2)) for n in range(1, 6)]
    await s.register_claim_checks(pid, checks)
    w.checks = [c.id for c in checks] + [cc.check_id(pid, "payout-unknown")]
    changes = {
        checks[1].id: lambda c: cc.close(c, now, 3_600_000),
        checks[2].id: lambda c: cc.claim(cc.close(c), "0x" + "12" * 32, now),
        checks[3].id: lambda c: cc.expire(cc.close(c, now - 10_000, 1), now),
        checks[4].id: lambda c: cc.close(c),
    }
    for check_id, change in changes.items():
        async with s.update_claim_checks(pid, [check_id], change, None):
            pass


async def _fill_tracking(s: SqliteStateStore, w: World) -> None:
    pid = w.pid
    async with s.first_within(pid, "repeat-1", LONG):
        pass
    await s.bind_code(pid, "t1", w.codes["affiliate"], LONG)
    await s.bind_user(pid, "t1", user(20), LONG)
    await s.bind_user(pid, "t2", user(20), LONG / 2)
    await s.bind_user(pid, "t3", user(21), LONG)
    await s.bind_code(pid, "t-old", w.codes["spare"], 0.001)  # past its time before the move: not copied
    await s.bind_user(pid, "t-old", user(21), 0.001)


async def _fill_people(s: SqliteStateStore, w: World) -> None:
    pid = w.pid
    await s.block_user(pid, user(30), "fraud")
    await s.block_user(pid, user(31), None)
    await s.block_user(pid, user(32), "bot")
    await s.block_user(pid, user(30), "fraud, confirmed")  # its reason replaced, its time kept
    w.erasures["done"] = await s.request_erasure(pid, user(41))
    w.erasures["taken"] = await s.request_erasure(pid, user(42))
    taken = await s.take_erasures(100)
    await s.finish_erasures([e for e in taken if e.id == w.erasures["done"]])
    w.erasures["pending"] = await s.request_erasure(pid, user(40))


FILLS = (_fill_projects, _fill_codes, _fill_events, _fill_checks, _fill_tracking, _fill_people)


async def _filled(path: Path) -> World:
    s, w = SqliteStateStore(SqliteDatabase(path)), World()
    try:
        for fill in FILLS:
            await fill(s, w)
    finally:
        await s.close()
    await asyncio.sleep(0.01)  # the short bindings past their time
    return w


async def answers(store, w: World) -> dict:
    """Every read of the ports the copy fills, of the moved project."""
    pid, users = w.pid, w.users
    codes = [*w.codes.values(), w.codes["affiliate"].lower(), "NOPE123"]
    return {
        "project": [await store.get_project(pid), await store.project_exists(pid)],
        "gone": [await store.get_project(w.gone), await store.project_exists(w.gone)],
        "keys": [await store.list_keys(pid), await store.list_keys(w.gone)],
        "resolved": {name: await store.resolve_key(key) for name, key in w.keys.items()},
        "config": await store.get_config(pid),
        "signer": await store.get_claim_signer(pid),
        "affiliates": [await store.affiliates_among(pid, users), await store.get_affiliate(pid, user(2))],
        "code_lists": {str(u): await store.list_codes(pid, u, 0, 10) for u in users[:3]},
        "code_page": await store.list_codes(pid, user(1), 1, 1),
        "codes_of": await store.codes_of(pid, users),
        "codes": {code: await store.get_code(pid, code) for code in codes},
        "rebates": await store.rebate_rates(pid, codes),
        "referrals": [await store.referrals_among(pid, users), await store.referral_of(pid, user(11))],
        "chains": await store.referrer_chains(pid, users, 64),
        "dedup": {d: await store.event_status(pid, d) for d in ("e-1", "e-2", "e-3", "e-4", "e-5")},
        "processed": await store.processed_among(pid, ["e-1", "e-2", "e-3", "e-4", "e-5"]),
        "events": [await store.has_event(pid, u, n) for u in users for n in ("purchase", "signup")],
        "checks": await store.get_claim_checks(pid, w.checks),
        "tracked": {t: await store.tracked_user(pid, t) for t in ("t1", "t2", "t3", "t-old", "t-none")},
        "tracking_ids": await store.tracking_ids_of(pid, users),
        "blocklist": [await store.blocklist_page(pid, 0, 10), await store.blocklist_page(pid, 1, 1)],
        "blocked": await store.blocklisted_among(pid, users),
        "erasures": {name: await store.erasure_status(pid, e) for name, e in {**w.erasures, "x": "er_x"}.items()},
    }


async def outcome(call) -> tuple:
    """What a change answers: its value, or the kind of error it raises."""
    try:
        return "ok", await call
    except Exception as exc:
        return "error", type(exc).__name__


async def _changes(store, w: World) -> dict:
    """Changes whose answer depends on the indexes the copy wrote: the same on both stores. Random names are left
    out of what is compared (each store draws its own)."""
    pid = w.pid
    replay = await ingest(store, pid, ["e-1"], [(user(10), "purchase")], ("idem-1", "hash-1"))
    again = await ingest(store, pid, ["e-1", "e-3", "e-9"], [(user(10), "purchase")] * 3)
    (new_code,) = await create_codes(store, pid, user(1))
    listed = await store.list_codes(pid, user(1), 0, 10)
    async with store.first_within(pid, "repeat-1", LONG) as first:
        pass

    async def use(code: str, who: User):
        async with store.use_code(pid, code, who, {}) as used:
            return used.value[0].current_uses

    async def affiliate_code(owner: User, name: str):
        async with store.create_affiliate_code(pid, owner, name, None, {}) as created:
            return created.value.code

    async def remove(who: User, code: str, referrer: User):
        async with store.remove_referral(pid, who, code, referrer) as removed:
            return removed.value

    async def taken():
        return {e.user: e.pseudonym for e in await store.take_erasures(10_000) if e.project_id == pid}

    return {
        "replay": replay.replay,
        "reused": await outcome(ingest(store, pid, ["e-1"], [(user(10), "purchase")], ("idem-1", "other"))),
        "fresh": again.fresh,
        "newest_first": (listed[0][0].code == new_code, listed[1]),
        "repeat": first,
        "at_its_limit": await outcome(use(w.codes["two_uses"], user(13))),
        "referred_already": await outcome(use(w.codes["spare"], user(10))),
        "usable": await outcome(use(w.codes["former_2"], user(13))),
        "former_name": await outcome(affiliate_code(user(5), "ada_two")),
        "one_per_owner": await outcome(affiliate_code(user(1), "another")),
        "removed": await outcome(remove(user(11), "ada", user(1))),
        "pending_again": await store.request_erasure(pid, user(40)) == w.erasures["pending"],
        "taken_again": await store.request_erasure(pid, user(42)) != w.erasures["taken"],
        "taken": await taken(),
    }


async def _move(path: Path, url: str) -> dict:
    redis = await open_redis(url, decode_responses=True)
    try:
        return await copy_state(path, redis, SETTINGS)
    finally:
        await redis.aclose()


@pytest.fixture(params=["redis", pytest.param("redis_cluster", marks=pytest.mark.cluster)])
def url(request) -> str:
    """The Redis moved into: one node, and with `-m cluster` a Redis Cluster."""
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
async def stores(tmp_path, url):
    """The SQLite store filled, moved into Redis: (the world, the SQLite store, the Redis store, what was copied)."""
    path = tmp_path / "state.sqlite3"
    w = await _filled(path)
    copied = await _move(path, url)
    sqlite, redis = SqliteStateStore(SqliteDatabase(path)), await open_redis_state(url)
    yield w, sqlite, redis, copied
    await sqlite.close()
    await redis.close()


async def test_the_redis_store_answers_every_read_as_the_sqlite_store_did(stores):
    w, sqlite, redis, copied = stores
    expected = await answers(sqlite, w)
    assert await answers(redis, w) == expected
    assert expected["codes"][w.codes["former"]].names == ("ADA", "ADA_TWO") and expected["rebates"]["ADA_THREE"]
    assert [len(expected[name]) for name in ("checks", "tracking_ids", "blocked")] == [5, 2, 3]
    assert set(expected["dedup"].values()) == {"processed", "failed", "accepted", None}
    assert copied["codes+code_names"] >= 4 and copied["code_uses"] == 4 and copied["erasures"] >= 3


async def test_changes_relying_on_the_copied_indexes_answer_the_same(stores):
    w, sqlite, redis, _ = stores
    expected = await _changes(sqlite, w)
    assert await _changes(redis, w) == expected
    assert expected["replay"] == b'{"accepted":3}' and expected["fresh"] == [2] and expected["repeat"] is False
    assert expected["reused"] == ("error", "IdempotencyKeyReused") and expected["newest_first"] == (True, 4)
    assert expected["former_name"] == ("error", "CodeInUse") and expected["removed"][0] == "ok"
    assert expected["pending_again"] and expected["taken_again"] and set(expected["taken"]) == {user(40), user(42)}


async def test_times_to_live_are_the_stores_own(stores):
    w, _, redis, _ = stores
    settings, k, r = SETTINGS, ProjectKeys(w.pid), redis.redis

    async def ttl_s(key: str) -> float:
        return await r.pttl(key) / 1000

    window, hot = settings.dedup_window, settings.dedup_hot_window
    assert window - 60 < await ttl_s(k.dedup("e-3")) <= window  # accepted: the window from its acceptance
    assert hot - 60 < await ttl_s(k.dedup("e-1")) <= hot  # processed: the hot window
    assert window - 60 < await ttl_s(k.user_events(user(10))) <= window
    assert settings.idempotency_ttl - 60 < await ttl_s(k.idempotency("idem-1")) <= settings.idempotency_ttl
    assert LONG - 60 < await ttl_s(k.tracking_ids(user(20))) <= LONG  # its latest binding's
    assert LONG - 60 < await ttl_s(k.tracking_code("t1")) <= LONG
    assert LONG - 60 < await ttl_s(k.tracking_repeat("repeat-1")) <= LONG
    assert await r.pttl(k.claim_check(w.checks[0])) == await r.pttl(k.code(w.codes["spare"])) == -1
    assert await r.exists(k.tracking_code("t-old"), k.tracking_user("t-old")) == 0


async def test_a_second_move_is_refused_and_writes_nothing(stores, tmp_path, url):
    w, _, redis, _ = stores
    await redis.put_config(w.pid, PayoutConfig.model_validate({}))  # changed in Redis since the move
    again = SqliteStateStore(SqliteDatabase(tmp_path / "state.sqlite3"))
    newcomer = await again.create_project("newcomer")
    newcomer_key = await again.create_key(newcomer, ["query"])
    await again.close()
    with pytest.raises(MoveRefused, match=f"project {w.pid}"):
        await _move(tmp_path / "state.sqlite3", url)
    assert await redis.get_project(newcomer) is None and await redis.resolve_key(newcomer_key) is None
    assert await redis.get_config(w.pid) == PayoutConfig.model_validate({})


# Keys the Redis store writes that have no SQLite counterpart (not copied), and a code's field of the same kind.
_NOT_COPIED = ("af", "outbox", "outbox_records", "referral_removals")


async def _layout(r, w: World) -> dict[str, tuple]:
    """The project's keys, each named with its generated codes as placeholders: its type, whether it expires, its
    fields (hashes), members (sets, sorted sets) or number of items (lists), and the fields of every JSON object among
    its values (strings, hashes' values, lists' items)."""
    prefix, found = ProjectKeys(w.pid)._key(""), {}

    aliases = {code: alias for alias, code in w.codes.items() if not code.startswith("ADA")}  # (generated)
    aliases.update((check_id, f"check {n}") for n, check_id in enumerate(w.checks))

    def named(text: str) -> str:
        for drawn, alias in aliases.items():
            text = text.replace(drawn, f"<{alias}>")
        return text

    async for key in r.scan_iter(match=prefix + "*"):
        name = named(key[len(prefix) :])
        if name.split(":")[0] in _NOT_COPIED:
            continue
        kind, values = await r.type(key), []
        if kind == "hash":
            values = await r.hgetall(key)
            parts = [field for field in values if field != "pending"]
            values = list(values.values())
        elif kind == "list":
            values = await r.lrange(key, 0, -1)
            parts = [str(len(values))]
        elif kind == "string":
            values, parts = [await r.get(key)], []  # (their texts: compared through the ports)
        elif kind == "set":
            parts = await r.smembers(key)
        else:  # (a user's tracking ids past their time read as absent: the store drops them at its next binding)
            parts = await r.zrangebyscore(key, now_ms() if name.startswith("track_ids:") else "-inf", "+inf")
        found[name] = (kind, await r.pttl(key) > 0, sorted(map(named, parts)), _objects(values))
    return found


def _objects(values: list) -> list:
    """The fields of each JSON object among `values` (sorted)."""
    shapes = []
    for value in values:
        try:
            document = json.loads(value)
        except (TypeError, ValueError):
            continue
        if isinstance(document, dict):
            shapes.append(sorted(document))
    return sorted(shapes)


async def test_the_keys_are_laid_out_as_the_redis_store_writes_them(stores):
    """The same changes made through the Redis store itself: the same keys, types, expiries, fields and documents."""
    w, _, redis, _ = stores
    direct = World()
    for fill in FILLS:
        await fill(redis, direct)
    await asyncio.sleep(0.01)
    moved, written = await _layout(redis.redis, w), await _layout(redis.redis, direct)
    assert moved == written
    assert {"code_seq", "affiliate_codes", "code_names", "erasure_salt", "blocklist_by_time"} <= set(moved)


async def test_a_move_that_failed_before_its_projects_may_run_again(stores, tmp_path, url):
    """Everything but the projects and their keys written (a move that failed there): run again, the same answers."""
    w, sqlite, redis, _ = stores
    await redis.redis.delete(ProjectKeys(w.pid).project(), ProjectKeys(w.gone).project())
    for info in [*await sqlite.list_keys(w.pid), *await sqlite.list_keys(w.gone)]:
        await redis.redis.delete(redis_keys.api_key(info.key_id))
    await _move(tmp_path / "state.sqlite3", url)
    assert await answers(redis, w) == await answers(sqlite, w)
