"""The archive filter: a Bloom filter per project in Redis of the event ids the workers wrote to `dedup_ids`, so that
the ingest edge asks ClickHouse only about the ids it cannot rule out (issue 32). Without it every id Redis's hot
window no longer knows costs ClickHouse ~120 µs of CPU; with it, only the filter's maybes (the duplicates past the
hot window, and ~0.2% of new ids) do. A false positive costs a lookup, never a wrong answer: the filter's "no" is
trusted only where it is exact.

What goes in: each id the workers mark processed or failed (mark_processed.lua), which they do after its
`dedup_ids` row is written, and what a re-feed reads back from `dedup_ids`. So the filter's "no" means "not
written since the filter's coverage began", and the workers' ids, not the edge's (an id accepted but never written
would only add false positives, and one accepted is in Redis's exact keys until written anyway).

Its layout (lua/include/archive_filter.lua): a generation per dedup window, the current one and the one before
(so an id stays until its window is over: ids of generation g were added within a window of its start, and it is
dropped a window after g+1 began); each a chain of sub-filters, 2^20 bits first and each next one twice as large,
with one more hash position each (10, 11, …), so the rate of false positives stays under 2^-9 whatever the project's
volume (measured 0.17%: docs/benchmarks.md; at 2^-7 a third of all-new batches still met ClickHouse): a small
project costs 128 KB per generation, 1M ids per window 3.9 MB (~4 B per id; docs/operations.md). A sub-filter is
made at its full size at once (grown bit by bit, Redis would double its allocation). The two hashes of an id are
computed here (blake2b, 64 bits), once per id; the Lua derives the positions. A check reads GETBIT by GETBIT (a new id
stops at its first 0 in each sub-filter); an add sets an id's bits in one BITFIELD.

When its "no" is trusted (otherwise every fresh id is asked of ClickHouse, as without it):
- Coverage: the filter must have received every written id for a whole window plus `authority_margin_s` (a day:
  workers of the version before, which do not add, run side by side for a rolling upgrade's minutes). A project's
  first 36 days, or the first 36 days after an upgrade, ask ClickHouse as before.
- The Redis instance: the filter records the run_id of the instance it was fed on. Redis may lose its last second
  (AOF everysec: docs/operations.md), and a failover a replica's lag: a mark lost with the second leaves an id in
  `dedup_ids` but not in the filter, and its dedup key may be gone too (the batch's claim and commit were lost with
  it). So on another run_id the filter is not trusted until it is re-fed: every id `dedup_ids` holds accepted after
  the last add the lost instance persisted, less `refeed_margin_s` (10 min), is added again, then the filter takes
  the new run_id. Why that suffices: an id whose dedup key survived is found by the claim; one whose key is gone had
  its commit lost, so after that last add, and its `accepted_at` (its receipt at the edge, before the claim) lies
  within a request's time of the commit (the claim lapses at 60 s), well inside the margin, whatever the clocks'
  skew of a few seconds. A second restart during the re-feed leaves it untrusted (the last call vouches only under
  the run_id the re-feed began under), and the next check re-feeds again.
The workers stay a second line behind it all: they look up in `dedup_ids` every id of a delivery Redis has not
marked done, and drop those written.

Metrics: `rewards_archive_filter_answers_total{answer}` (per fresh id: no, maybe, not_authoritative) and
`rewards_archive_filter_refeeds_total{outcome}`; a re-feed logs `archive filter re-fed`.
"""

import asyncio
import hashlib
from collections.abc import Sequence

import structlog
from prometheus_client import Counter

from rewards.adapters.production.redis_keys import ProjectKeys
from rewards.domain.timestamps import now_ms
from rewards.ports import DedupArchive

log = structlog.get_logger(__name__)

ANSWERS = Counter(
    "rewards_archive_filter_answers_total",
    "Fresh ids the archive filter answered: no (not asked of ClickHouse), maybe, not_authoritative (asked)",
    ["answer"],
)
REFEEDS = Counter("rewards_archive_filter_refeeds_total", "Re-feeds of an archive filter from dedup_ids", ["outcome"])
AUTHORITY_MARGIN_S = 86400.0
REFEED_MARGIN_S = 600.0
REFEED_CHUNK = 5000  # ids per script call of a re-feed (Redis stays responsive between them)


def id_hashes(dedup_ids: Sequence[str]) -> list[int]:
    """Two 32-bit hashes per id, flat (h1, h2, …): the second odd, so that its multiples reach every position of a
    power-of-two sub-filter."""
    hashes: list[int] = []
    for dedup_id in dedup_ids:
        digest = int.from_bytes(hashlib.blake2b(dedup_id.encode(), digest_size=8).digest(), "big")
        hashes += (digest >> 32, (digest & 0xFFFFFFFF) | 1)
    return hashes


class ArchiveFilter:
    """One process's use of the projects' archive filters: the check of a batch's fresh ids, and the re-feed of a
    filter found on another Redis instance (in the background, once per project at a time)."""

    def __init__(
        self,
        scripts,
        archive: DedupArchive | None,
        window_s: float,
        *,
        authority_margin_s: float = AUTHORITY_MARGIN_S,
        refeed_margin_s: float = REFEED_MARGIN_S,
    ):
        self._scripts = scripts
        self._archive = archive
        self._window_ms, self._margin_ms = int(window_s * 1000), int(authority_margin_s * 1000)
        self._refeed_margin_ms = int(refeed_margin_s * 1000)
        self._refeeding: dict[str, asyncio.Task] = {}

    def mark_args(self, dedup_ids: Sequence[str]) -> list:
        """mark_processed's arguments after the hot window: the window, then the ids' hashes."""
        return [self._window_ms, *id_hashes(dedup_ids)]

    async def maybes(self, project_id: str, dedup_ids: Sequence[str]) -> list[str]:
        """Those of `dedup_ids` the archive may hold: the filter's maybes, or all of them where it is not trusted."""
        if not dedup_ids:
            return []
        key, args = ProjectKeys(project_id).archive_filter(), [self._window_ms, self._margin_ms, *id_hashes(dedup_ids)]
        answer = await self._scripts.archive_filter_check(keys=[key], args=args)
        if answer[0] != "checked":
            ANSWERS.labels("not_authoritative").inc(len(dedup_ids))
            if answer[0] == "restarted":
                self._refeed_soon(project_id, answer[1], int(answer[2] or 0))
            return list(dedup_ids)
        maybes = [dedup_ids[i] for i in answer[1]]
        ANSWERS.labels("maybe").inc(len(maybes))
        ANSWERS.labels("no").inc(len(dedup_ids) - len(maybes))
        return maybes

    def _refeed_soon(self, project_id: str, run_id: str, last_ms: int) -> None:
        if self._archive is None or project_id in self._refeeding:
            return
        task = asyncio.create_task(self._refeed(project_id, run_id, last_ms))
        self._refeeding[project_id] = task
        task.add_done_callback(lambda _: self._refeeding.pop(project_id, None))

    async def _refeed(self, project_id: str, run_id: str, last_ms: int) -> None:
        """Add what `dedup_ids` holds from a little before the lost instance's last add, then vouch under `run_id`."""
        since_ms = max(last_ms - self._refeed_margin_ms, now_ms() - self._window_ms)
        try:
            ids = await self._archive.written_since(project_id, since_ms)
            key = ProjectKeys(project_id).archive_filter()
            for start in range(0, len(ids), REFEED_CHUNK):
                chunk = id_hashes(ids[start : start + REFEED_CHUNK])
                await self._scripts.archive_filter_refeed(keys=[key], args=[self._window_ms, "", *chunk])
            vouched = await self._scripts.archive_filter_refeed(keys=[key], args=[self._window_ms, run_id])
        except Exception as exc:  # the check asks ClickHouse meanwhile, and the next one re-feeds again
            REFEEDS.labels("failed").inc()
            log.warning("archive filter re-feed failed", project_id=project_id, error=repr(exc))
            return
        REFEEDS.labels("vouched" if vouched else "restarted_again").inc()
        log.info("archive filter re-fed", project_id=project_id, ids=len(ids), since_ms=since_ms, vouched=bool(vouched))

    async def settled(self) -> None:
        """Wait for the re-feeds under way (tests)."""
        await asyncio.gather(*self._refeeding.values(), return_exceptions=True)
