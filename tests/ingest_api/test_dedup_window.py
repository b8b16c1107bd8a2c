"""Bounded state (API.md §3's dedup window): dedup ids, users' event names and Idempotency-Key records expire
on both stores; past Redis's hot window the warehouse's `dedup_ids` answers until the window ends."""

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

from rewards.adapters import dedup_archive
from rewards.adapters.dedup_archive import WarehouseDedupArchive
from rewards.adapters.embedded.sqlite_db import SqliteDatabase
from rewards.adapters.embedded.sqlite_state import SqliteStateStore
from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_state import RedisStateStore
from rewards.domain.timestamps import now_ms
from rewards.ports import ArchiveUnavailable, LogUnavailable
from rewards.settings import Settings, parse_duration
from schemas.clickhouse.values import ch_datetime
from tests.contract.support import batch, ingest, redis_url  # noqa: F401 (a fixture)

WINDOW_S = 0.4


def test_durations_parse():
    assert [parse_duration(v) for v in ("35d", "6h", "90m", "30s", "500ms", "12", 7, "1.5h")] == [
        35 * 86400, 6 * 3600, 5400, 30, 0.5, 12, 7, 5400,
    ]  # fmt: skip
    for bad in ("", "5 weeks", "-1s", "0", "h"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert Settings().dedup_window == 35 * 86400 and Settings().idempotency_ttl == 86400
    assert Settings(dedup_window="12h").dedup_window == 43200


@pytest.fixture
async def sqlite_short(tmp_path):
    store = SqliteStateStore(SqliteDatabase(tmp_path / "state.sqlite3"), WINDOW_S, WINDOW_S)
    yield store
    await store.close()


@pytest.fixture
async def redis_short(redis_url):  # noqa: F811
    import redis.asyncio as aredis

    client = aredis.Redis.from_url(redis_url, decode_responses=True)
    store = RedisStateStore(client, dedup_window_s=WINDOW_S, idempotency_ttl_s=WINDOW_S)
    yield store
    await store.close()


@pytest.fixture(params=["sqlite", "redis"])
def short(request):
    return request.getfixturevalue(f"{request.param}_short")


async def test_an_id_past_its_window_is_new_again(short):
    pid = await short.create_project("window")
    assert (await ingest(short, pid, *batch("w-1", "w-2"))).fresh == [0, 1]
    await short.mark_processed(pid, ["w-1"])
    assert (await ingest(short, pid, *batch("w-1", "w-2", name="signup"))).fresh == []
    assert await short.processed_among(pid, ["w-1"]) == {"w-1"}
    assert await short.has_event(pid, batch("w-1")[1][0][0], "purchase")
    await asyncio.sleep(WINDOW_S + 0.1)
    assert [await short.event_status(pid, d) for d in ("w-1", "w-2")] == [None, None]
    assert await short.processed_among(pid, ["w-1", "w-2"]) == set()
    assert not await short.has_event(pid, batch("w-1")[1][0][0], "purchase")
    assert (await ingest(short, pid, *batch("w-1", "w-2"))).fresh == [0, 1]  # new events again
    assert await short.event_status(pid, "w-1") == "accepted"
    assert (await ingest(short, pid, *batch("w-1"))).fresh == []  # and duplicates of those, for a new window


async def test_idempotency_keys_expire(short):
    pid = await short.create_project("idem")
    await ingest(short, pid, *batch("k-1"), ("key", "hash-a"), b'{"ingested_events":1}')
    assert (await ingest(short, pid, *batch("k-1"), ("key", "hash-a"))).replay == b'{"ingested_events":1}'
    await asyncio.sleep(WINDOW_S + 0.1)
    claim = await ingest(short, pid, *batch("k-2"), ("key", "hash-b"), b'{"ingested_events":1}')
    assert (claim.replay, claim.fresh) == (None, [0])  # no 409: the record expired
    assert (await ingest(short, pid, *batch("k-2"), ("key", "hash-b"))).replay == b'{"ingested_events":1}'


async def test_sqlite_sweep_is_bounded(sqlite_short):
    store = sqlite_short
    pid = await store.create_project("sweep")
    ids = [f"s-{n}" for n in range(40)]
    await ingest(store, pid, *batch(*ids), ("key", "hash"))

    async def count(table: str) -> int:
        return await store._db.run(lambda c: c.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    assert await count("dedup") == 40 and await count("idempotency") == 1
    await asyncio.sleep(WINDOW_S + 0.1)
    assert await store.sweep_expired(limit=10) == 10 + 10 + 1  # dedup, user_events (of 40 users), idempotency
    assert await count("dedup") == 30
    while await store.sweep_expired(limit=10):
        pass
    assert (await count("dedup"), await count("user_events"), await count("idempotency")) == (0, 0, 0)
    await ingest(store, pid, *batch("s-100"))  # every ingest sweeps too (nothing left here)
    assert await count("dedup") == 1


async def test_sqlite_upgrade_keeps_existing_rows_one_window(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite3"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE dedup (project_id TEXT NOT NULL, dedup_id TEXT NOT NULL, processed INTEGER NOT NULL DEFAULT 0,"
        " PRIMARY KEY (project_id, dedup_id)) WITHOUT ROWID;"
        "INSERT INTO dedup VALUES ('p', 'old-1', 1);"
    )
    old.close()
    store = SqliteStateStore(SqliteDatabase(path))
    try:
        assert await store.event_status("p", "old-1") == "processed"
    finally:
        await store.close()


# -- Redis: TTLs, the hot window and the archive ---------------------------------------------------------


async def test_redis_keys_carry_their_windows(redis_url):  # noqa: F811
    import redis.asyncio as aredis

    client = aredis.Redis.from_url(redis_url, decode_responses=True)
    store = RedisStateStore(client, dedup_window_s=3600, hot_window_s=60, archive=_NoArchive())
    try:
        pid = await store.create_project("ttl")
        k = ProjectKeys(pid)
        await ingest(store, pid, *batch("t-1", "t-2"), ("key", "hash"))
        assert 3_500_000 < await client.pttl(k.dedup("t-1")) <= 3_600_000  # accepted: the window
        assert 3_500_000 < await client.pttl(k.user_events(batch("t-1")[1][0][0])) <= 3_600_000
        assert 86_000_000 < await client.pttl(k.idempotency("key")) <= 86_400_000
        await store.mark_processed(pid, ["t-1"])
        await store.mark_failed(pid, ["t-2"])
        assert 0 < await client.pttl(k.dedup("t-1")) <= 60_000  # processed: the hot window
        assert 0 < await client.pttl(k.dedup("t-2")) <= 60_000
        await client.set(k.dedup("legacy"), "processed")  # written before the windows: no TTL
        await client.set(k.dedup("late"), "accepted", px=5_000)  # less of its window left than the hot window
        await store.mark_processed(pid, ["legacy", "late", "never-seen"])
        assert 0 < await client.pttl(k.dedup("legacy")) <= 60_000
        assert 0 < await client.pttl(k.dedup("late")) <= 5_000
        assert await client.exists(k.dedup("never-seen")) == 0
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def redis_store(url: str, **options) -> AsyncIterator[tuple]:
    """A Redis state store on a client of its own, and the client (to read the keys it writes); the client closed
    after (not the store: it would close its archive, the module's warehouse)."""
    import redis.asyncio as aredis

    client = aredis.Redis.from_url(url, decode_responses=True)
    try:
        yield RedisStateStore(client, **options), client
    finally:
        await client.aclose()


class _NoArchive:
    async def known_among(self, project_id, dedup_ids, window_s):
        return {}

    async def close(self):
        pass


class _DownArchive(_NoArchive):
    async def known_among(self, project_id, dedup_ids, window_s):
        raise ArchiveUnavailable("down")


@pytest.fixture(scope="module")
async def chdb_archive(tmp_path_factory):
    from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse

    warehouse = ChdbWarehouse(tmp_path_factory.mktemp("warehouse"))
    await warehouse.migrate()
    yield warehouse
    await warehouse.close()


async def _written(warehouse, pid: str, dedup_ids: list[str], token: str, failed: bool = False) -> None:
    """What the workers write last for a delivery's conversions (or conversions set aside: `failed`)."""
    at = ch_datetime(now_ms())
    rows = [dedup_archive.row(pid, dedup_archive.EVENT, d, at, failed) for d in dedup_ids]
    await warehouse.insert("dedup_ids", rows, token)


async def test_one_lookup_of_several_projects_answers_each_its_own(chdb_archive):
    """The workers ask about a delivery's projects at once (dedup_archive.written_among_projects): an id written for one
    project is not written for another that asks about the same id."""
    first, second = f"first-{uuid.uuid4().hex}", f"second-{uuid.uuid4().hex}"
    await _written(chdb_archive, first, ["x", "y"], f"{first}:dedup_ids")
    await _written(chdb_archive, second, ["z"], f"{second}:dedup_ids", failed=True)
    asked = {(dedup_archive.EVENT, "x"), (dedup_archive.EVENT, "z")}
    keys = {first: asked, second: asked, "nobody": set()}
    found = await dedup_archive.written_among_projects(chdb_archive, keys, 35 * 86400)
    assert found == {first: {(dedup_archive.EVENT, "x"): "processed"}, second: {(dedup_archive.EVENT, "z"): "failed"}}


async def test_past_the_hot_window_the_warehouse_answers(redis_url, chdb_archive):  # noqa: F811
    archive = WarehouseDedupArchive(chdb_archive)
    async with redis_store(redis_url, dedup_window_s=1.5, hot_window_s=0.2, archive=archive) as (store, client):
        pid = await store.create_project("hot")
        k = ProjectKeys(pid)
        assert (await ingest(store, pid, *batch("h-1", "h-2"))).fresh == [0, 1]
        await _written(chdb_archive, pid, ["h-1", "h-2"], f"{pid}-1")
        await store.mark_processed(pid, ["h-1", "h-2"])
        await asyncio.sleep(0.3)
        assert await client.exists(k.dedup("h-1")) == 0  # Redis forgot it: past the hot window
        assert (await ingest(store, pid, *batch("h-1", "h-3", "h-2"))).fresh == [1]  # the warehouse knew 2
        assert await client.exists(k.dedup("h-1")) == 0  # its claim released
        assert await store.event_status(pid, "h-1") == "processed"
        assert await archive.known_among(pid, [], 1) == {}
        await asyncio.sleep(1.5)  # past the window: new again, everywhere
        assert await store.event_status(pid, "h-1") is None
        assert (await ingest(store, pid, *batch("h-1", "h-2"))).fresh == [0, 1]


async def test_failed_ids_stay_known_through_the_warehouse(redis_url, chdb_archive):  # noqa: F811
    async with redis_store(
        redis_url, dedup_window_s=60, hot_window_s=0.2, archive=WarehouseDedupArchive(chdb_archive)
    ) as (store, _):
        pid = await store.create_project("failed")
        await ingest(store, pid, *batch("x-1"))
        await _written(chdb_archive, pid, ["x-1"], f"{pid}-dl", failed=True)
        await store.mark_failed(pid, ["x-1"])
        await asyncio.sleep(0.3)
        assert await store.event_status(pid, "x-1") == "failed"
        assert (await ingest(store, pid, *batch("x-1"))).fresh == []


async def test_an_event_set_aside_then_replayed_reads_processed_past_the_hot_window(redis_url, chdb_archive):  # noqa: F811
    """A conversion set aside, then replayed from the dead letters and written (rewards.domain.dead_letters): its
    failed row is followed by a processed one, and the latest tells."""
    async with redis_store(
        redis_url, dedup_window_s=60, hot_window_s=0.2, archive=WarehouseDedupArchive(chdb_archive)
    ) as (store, _):
        pid = await store.create_project("replayed")
        await ingest(store, pid, *batch("r-1"))
        await _written(chdb_archive, pid, ["r-1"], f"{pid}-dl", failed=True)
        await asyncio.sleep(0.01)
        await _written(chdb_archive, pid, ["r-1"], f"{pid}-replay")
        await asyncio.sleep(0.3)  # past the hot window: the warehouse answers
        assert await store.event_status(pid, "r-1") == "processed"
        assert (await ingest(store, pid, *batch("r-1"))).fresh == []


async def test_an_archive_that_does_not_answer_refuses_the_batch(redis_url):  # noqa: F811
    async with redis_store(redis_url, dedup_window_s=60, hot_window_s=1, archive=_DownArchive()) as (store, client):
        pid = await store.create_project("down")
        with pytest.raises(ArchiveUnavailable) as refused:  # answered 503 with Retry-After, nothing changed
            await ingest(store, pid, *batch("d-1"), ("key", "hash"))
        assert not isinstance(refused.value, LogUnavailable)  # the warehouse's outage, not the log's
        assert "dedup archive" in refused.value.answer and "dedup archive" in refused.value.log_line
        assert await client.exists(ProjectKeys(pid).dedup("d-1"), ProjectKeys(pid).idempotency("key")) == 0


async def test_keys_from_before_the_windows_get_one(redis_url):  # noqa: F811
    async with redis_store(redis_url, dedup_window_s=3600, hot_window_s=60, archive=_NoArchive()) as (store, client):
        pid = await store.create_project("legacy")
        k = ProjectKeys(pid)
        await client.set(k.dedup("old-1"), "processed")
        await client.set(k.dedup("old-2"), "accepted")
        await client.sadd(k.user_events(batch("old-1")[1][0][0]), "purchase")
        await client.set(k.dedup("new"), "processed", px=5_000)
        assert await store.bound_unexpiring_keys() >= 3
        assert 0 < await client.pttl(k.dedup("old-1")) <= 60_000
        assert 60_000 < await client.pttl(k.dedup("old-2")) <= 3_600_000
        assert 60_000 < await client.pttl(k.user_events(batch("old-1")[1][0][0])) <= 3_600_000
        assert 0 < await client.pttl(k.dedup("new")) <= 5_000  # a key with a TTL keeps it


def test_the_cli_bounds_them_with_a_progress_bar(redis_url):  # noqa: F811
    import json

    import redis
    from typer.testing import CliRunner

    from rewards.cli import app

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    keys = [ProjectKeys("cli-legacy").dedup(d) for d in ("a", "b")]
    client.set(keys[0], "processed")
    client.set(keys[1], "accepted")
    result = CliRunner().invoke(app, ["bound-redis-keys"], env={"REDIS_URL": redis_url})
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["bounded"] >= 2 and "scanning" in result.stderr
    assert 0 < client.pttl(keys[0]) <= 10 * 60_000 < client.pttl(keys[1])  # the hot window; the whole window
    result = CliRunner().invoke(app, ["bound-redis-keys"], env={"REDIS_URL": ""})
    assert result.exit_code == 1 and "set REDIS_URL" in result.stderr


async def test_the_workers_store_keeps_processed_ids_for_the_hot_window(redis_url):  # noqa: F811
    """The workers open the store without an archive (they ask the warehouse themselves): their marks must still
    shorten an id's life to the hot window, or Redis would hold the whole window after all."""
    from rewards.adapters.production.redis_state import open_redis_state

    store = await open_redis_state(redis_url, Settings())
    try:
        pid = await store.create_project("workers")
        await ingest(store, pid, *batch("hw-1"))
        await store.mark_processed(pid, ["hw-1"])
        assert 0 < await store._redis.pttl(ProjectKeys(pid).dedup("hw-1")) <= Settings().dedup_hot_window * 1000
    finally:
        await store.close()
