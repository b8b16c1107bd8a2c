"""rewards.adapters.production.grouped_archive.GroupedArchive: the dedup archive asked once for the lookups that wait
together, each lookup answered for its own ids, exactly as the archive would have answered it alone."""

import asyncio

import pytest

from rewards.adapters.production.grouped_archive import GroupedArchive
from rewards.ports import ArchiveUnavailable


class SlowArchive:
    """Knows the ids starting with "k"; each query takes a moment and is recorded."""

    def __init__(self, fail: bool = False):
        self.queries: list[tuple[str, list[str], float]] = []
        self.fail = fail

    async def known_among(self, project_id, dedup_ids, window_s):
        self.queries.append((project_id, list(dedup_ids), window_s))
        await asyncio.sleep(0.02)
        if self.fail:
            raise ArchiveUnavailable("the dedup archive does not answer: down")
        return {d: "processed" for d in dedup_ids if d.startswith("k")}

    async def close(self):
        pass


async def test_lookups_that_wait_together_are_one_query_each_answered_for_its_own_ids():
    inner = SlowArchive()
    archive = GroupedArchive(inner)
    first = asyncio.create_task(archive.known_among("p", ["k0"], 60.0))
    await asyncio.sleep(0.005)  # its query is out
    lookups = [["k1", "n1"], ["n2", "k2"], ["k1", "k3"], ["n4"]]
    answers = await asyncio.gather(*(archive.known_among("p", ids, 60.0) for ids in lookups))
    assert answers == [{"k1": "processed"}, {"k2": "processed"}, {"k1": "processed", "k3": "processed"}, {}]
    assert await first == {"k0": "processed"}
    # The others came while the first was out, and went together once it was back (each id once).
    assert inner.queries == [("p", ["k0"], 60.0), ("p", ["k1", "n1", "n2", "k2", "k3", "n4"], 60.0)]
    assert await archive.known_among("p", ["k9"], 60.0) == {"k9": "processed"}  # idle again: at once
    assert len(inner.queries) == 3


async def test_projects_and_windows_are_asked_apart_and_a_query_holds_max_ids():
    inner = SlowArchive()
    archive = GroupedArchive(inner)
    archive.MAX_IDS = 3
    await asyncio.gather(
        archive.known_among("p", ["a"], 60.0), archive.known_among("q", ["b"], 60.0),
        archive.known_among("p", ["c"], 30.0), archive.known_among("p", ["d", "e"], 60.0),
        archive.known_among("p", ["f", "g"], 60.0), archive.known_among("p", ["h"], 60.0),
    )  # fmt: skip
    assert sorted(inner.queries) == sorted([
        ("p", ["a", "d", "e"], 60.0), ("p", ["f", "g", "h"], 60.0), ("q", ["b"], 60.0), ("p", ["c"], 30.0),
    ])  # fmt: skip


async def test_a_failure_fails_each_lookup_of_its_query_and_the_next_ones_are_asked_again():
    inner = SlowArchive(fail=True)
    archive = GroupedArchive(inner)
    results = await asyncio.gather(*(archive.known_among("p", [f"k{i}"], 60.0) for i in range(3)),
                                   return_exceptions=True)  # fmt: skip
    assert all(isinstance(result, ArchiveUnavailable) for result in results)
    inner.fail = False
    assert await archive.known_among("p", ["k1"], 60.0) == {"k1": "processed"}


async def test_a_cancelled_lookup_leaves_the_others_answered():
    inner = SlowArchive()
    archive = GroupedArchive(inner)
    first = asyncio.create_task(archive.known_among("p", ["k1"], 60.0))
    await asyncio.sleep(0)
    await asyncio.sleep(0.005)  # its query is out
    second = asyncio.create_task(archive.known_among("p", ["k2"], 60.0))
    third = asyncio.create_task(archive.known_among("p", ["k3"], 60.0))
    await asyncio.sleep(0)
    second.cancel()
    assert await first == {"k1": "processed"}
    assert await third == {"k3": "processed"}
    with pytest.raises(asyncio.CancelledError):
        await second
    assert inner.queries[-1] == ("p", ["k3"], 60.0)
