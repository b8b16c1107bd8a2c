"""The archive filter (rewards.adapters.production.redis_state.archive_filter): no false negatives, a false-positive
rate near its target, generations that drop ids past their window only; and the ingest edge's exact answer whatever
the filter says: a duplicate past the hot window is refused when the filter says maybe, and when its "no" is not
trusted (a filter younger than a window, or one fed on another Redis instance) ClickHouse is asked, and the filter is
re-fed from `dedup_ids`."""

import asyncio
import uuid

import pytest
import redis.asyncio as aredis

from rewards.adapters import dedup_archive
from rewards.adapters.dedup_archive import WarehouseDedupArchive
from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.adapters.production.redis_scripts import Scripts
from rewards.adapters.production.redis_state import RedisStateStore
from rewards.adapters.production.redis_state.archive_filter import ArchiveFilter, id_hashes
from rewards.domain.timestamps import now_ms
from schemas.clickhouse.values import ch_datetime
from tests.contract.support import batch, ingest, redis_url  # noqa: F401 (a fixture)

TRUSTED = {"authority_margin_s": 0}


@pytest.fixture
async def client(redis_url):  # noqa: F811
    client = aredis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


async def _add(client, project: str, ids: list[str], window_s: float = 3600) -> None:
    """What the workers' marks add (mark_processed.lua), without dedup keys: the filter alone."""
    key, scripts = ProjectKeys(project).archive_filter(), Scripts.register(client)
    for start in range(0, len(ids), 5000):
        hashes = id_hashes(ids[start : start + 5000])
        await scripts.archive_filter_refeed(keys=[key], args=[int(window_s * 1000), "", *hashes])


async def _trusted_since_a_window(client, project: str) -> None:
    """As if the filter had been fed for a whole window already."""
    await client.hset(ProjectKeys(project).archive_filter(), "cover", 0)


async def test_no_false_negatives_and_a_false_positive_rate_near_its_target(client):
    project = f"bloom-{uuid.uuid4().hex}"
    members = [f"order-{uuid.uuid4().hex}" for _ in range(100_000)]
    others = [f"order-{uuid.uuid4().hex}" for _ in range(100_000)]
    await _add(client, project, members)
    await _trusted_since_a_window(client, project)
    check = ArchiveFilter(Scripts.register(client), None, 3600)
    maybes = [m for start in range(0, 100_000, 5000) for m in await check.maybes(project, members[start:][:5000])]
    assert maybes == members  # every member is a maybe
    false = [m for start in range(0, 100_000, 5000) for m in await check.maybes(project, others[start:][:5000])]
    assert len(false) / len(others) < 0.01  # the chain's bound is 2^-7; measured ~0.4% (docs/benchmarks.md)
    state = await client.hgetall(ProjectKeys(project).archive_filter())
    assert state["g_subs"] == "2"  # 100k ids outgrow the first sub-filter (~72,700 at 10 positions)
    # It rolled over exactly at its capacity (ids are added in groups that never pass it): the rest are the second's,
    # but for the few whose bits were all set already (its false positives, counted once).
    first = int(2**20 * 0.6931 / 10)
    assert 100_000 - first - 100 < int(state["g_n"]) <= 100_000 - first


async def test_a_generation_is_dropped_a_window_after_the_next_began(client):
    project, window_s = f"gens-{uuid.uuid4().hex}", 0.5
    check = ArchiveFilter(Scripts.register(client), None, window_s, **TRUSTED)
    await _add(client, project, ["a"], window_s)
    await _trusted_since_a_window(client, project)
    await asyncio.sleep(window_s + 0.05)
    await _add(client, project, ["b"], window_s)  # generation 2; "a" stays in generation 1
    await _trusted_since_a_window(client, project)
    assert await check.maybes(project, ["a", "b", "c"]) == ["a", "b"]
    await asyncio.sleep(window_s + 0.05)
    await _add(client, project, ["c"], window_s)  # generation 3: generation 1 dropped, "a" past its window
    state = await client.hgetall(ProjectKeys(project).archive_filter())
    assert (state["g"], int(state["cover"]) <= now_ms() - window_s * 1000) == ("3", True)  # cover: generation 2's
    assert await check.maybes(project, ["a", "b", "c"]) == ["b", "c"]


class CountingArchive:
    """The DedupArchive port over `written` (id → accepted ms): records what it is asked."""

    def __init__(self):
        self.written: dict[str, int] = {}
        self.asked: list[str] = []

    async def known_among(self, project_id, dedup_ids, window_s):
        self.asked += dedup_ids
        return {d: "processed" for d in dedup_ids if d in self.written}

    async def written_since(self, project_id, since_ms):
        return [d for d, at in self.written.items() if at > since_ms]

    async def close(self):
        pass


@pytest.fixture
async def edge(client):
    archive = CountingArchive()
    store = RedisStateStore(client, dedup_window_s=60, hot_window_s=0.2, archive=archive, archive_filter=TRUSTED)
    project = await store.create_project("filter")
    return store, archive, project


async def _written_and_marked(store, archive: CountingArchive, project: str, ids: list[str]) -> None:
    for dedup_id in ids:
        archive.written[dedup_id] = now_ms()
    await store.mark_processed(project, ids)


async def test_a_duplicate_past_the_hot_window_is_refused_when_the_filter_says_maybe(edge):
    store, archive, project = edge
    assert (await ingest(store, project, *batch("m-1", "m-2"))).fresh == [0, 1]  # (asked: the filter is young)
    await _written_and_marked(store, archive, project, ["m-1", "m-2"])
    await _trusted_since_a_window(store._redis, project)
    await asyncio.sleep(0.3)  # past the hot window: Redis forgot both
    archive.asked.clear()
    fresh = [f"m-new-{n}" for n in range(50)]
    assert (await ingest(store, project, *batch("m-1", *fresh, "m-2"))).fresh == list(range(1, 51))
    assert {"m-1", "m-2"} <= set(archive.asked) and len(archive.asked) <= 4  # the maybes only (a false one at most)


async def test_a_duplicate_the_filter_never_got_is_refused_while_the_filter_is_young(edge):
    store, archive, project = edge
    archive.written["y-1"] = now_ms()  # written before the filter existed (an upgrade): not in it
    await _written_and_marked(store, archive, project, ["y-0"])  # the filter starts now: not trusted for a window
    assert (await ingest(store, project, *batch("y-1", "y-2"))).fresh == [1]
    assert archive.asked == ["y-1", "y-2"]


async def test_after_a_redis_restart_clickhouse_answers_until_the_filter_is_re_fed(edge):
    store, archive, project = edge
    await _written_and_marked(store, archive, project, ["r-0"])
    await _trusted_since_a_window(store._redis, project)
    archive.written["r-1"] = now_ms()  # written, its mark (and its filter bits) lost with Redis's last second
    await store._redis.hset(ProjectKeys(project).archive_filter(), "run", "the-lost-instance")
    assert (await ingest(store, project, *batch("r-1", "r-2"))).fresh == [1]  # not trusted: asked, refused
    assert archive.asked == ["r-1", "r-2"]
    await store._filter.settled()  # the re-feed: what dedup_ids holds from before the lost instance's last add
    archive.asked.clear()
    assert (await ingest(store, project, *batch("r-1", "r-0", "r-3"))).fresh == [2]  # trusted again, r-1 in it
    assert set(archive.asked) >= {"r-1", "r-0"} and "r-3" not in archive.asked


async def test_a_restart_during_the_re_feed_leaves_it_untrusted(client):
    project = f"again-{uuid.uuid4().hex}"
    await _add(client, project, ["x"])
    await _trusted_since_a_window(client, project)
    key, scripts = ProjectKeys(project).archive_filter(), Scripts.register(client)
    await client.hset(key, "run", "the-lost-instance")
    # the re-feed began under an instance that restarted since (this one is another):
    assert await scripts.archive_filter_refeed(keys=[key], args=[3600_000, "the-instance-before"]) == 0
    assert await scripts.archive_filter_check(keys=[key], args=[3600_000, 0, *id_hashes(["x"])]) == [
        "restarted", (await client.info("server"))["run_id"], await client.hget(key, "last"),
    ]  # fmt: skip


@pytest.fixture(scope="module")
async def chdb(tmp_path_factory):
    from rewards.adapters.embedded.chdb_warehouse import ChdbWarehouse

    warehouse = ChdbWarehouse(tmp_path_factory.mktemp("warehouse"))
    await warehouse.migrate()
    yield warehouse
    await warehouse.close()


async def test_the_warehouse_answers_what_it_wrote_since(chdb):
    project, archive = f"since-{uuid.uuid4().hex}", WarehouseDedupArchive(chdb)
    at = [ch_datetime(now_ms() - minutes * 60_000) for minutes in (0, 5)]
    rows = [dedup_archive.row(project, dedup_archive.EVENT, f"w-{n}", at[n > 0]) for n in (0, 5)]
    rows.append(dedup_archive.row(project, dedup_archive.CODE_USE, "u-1", ch_datetime(now_ms())))
    await chdb.insert("dedup_ids", rows, f"{project}-1")
    assert await archive.written_since(project, now_ms() - 120_000) == ["w-0"]
    assert sorted(await archive.written_since(project, now_ms() - 600_000)) == ["w-0", "w-5"]


async def test_a_big_delivery_is_marked_in_chunks_every_id_marked_and_in_the_filter(edge):
    store, archive, project = edge
    ids = [f"big-{n}" for n in range(2_500)]  # three script calls (MARK_CHUNK: 1,000)
    assert len((await ingest(store, project, *batch(*ids))).fresh) == 2_500
    await _written_and_marked(store, archive, project, ids)
    assert await store.processed_among(project, ids) == set(ids)
    await _trusted_since_a_window(store._redis, project)
    assert set(await store._filter.maybes(project, ids)) == set(ids)  # no false negative across the chunks
