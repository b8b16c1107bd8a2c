"""An export streamed (API.md §11, GET /exports/payouts) from the query benchmark's payouts (bench/queries.py runs it
on each shape's server): rows a second, and the serving process's peak RSS above its RSS before the export (the
export holds one page of rows at a time, whatever the window: issue 33's bound is 100 MB for 1M payouts)."""

import threading
import time

import httpx
import psutil

from bench.report import Figure

RSS_GROWTH_LIMIT_MB = 100


class PeakRss:
    """The peak RSS of a process, sampled every 20 ms on a thread while the block runs."""

    def __init__(self, pid: int):
        self._process, self._stop = psutil.Process(pid), threading.Event()
        self.before = self.peak = self._process.memory_info().rss

    def __enter__(self) -> "PeakRss":
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._process.memory_info().rss)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def measure(url: str, pid: int, api_key: str, payouts: int, shape: str, way: str) -> list[Figure]:
    """Export every payout of the project of `api_key` (`payouts` of them) as CSV; two figures."""
    headers = {"Authorization": f"Bearer {api_key}"}
    rows = size = 0
    with PeakRss(pid) as rss, httpx.Client(base_url=url, headers=headers, timeout=600) as client:
        start = time.perf_counter()
        with client.stream("GET", "/api/v1/exports/payouts", params={"format": "csv"}) as answer:
            answer.raise_for_status()
            for chunk in answer.iter_bytes():
                rows += chunk.count(b"\n")
                size += len(chunk)
        seconds = time.perf_counter() - start
    rows -= 1  # the header line
    if rows != payouts:
        raise RuntimeError(f"the export held {rows} rows of {payouts}")
    scale = f"{payouts // 1_000_000}M" if payouts >= 1_000_000 else f"{payouts // 1000}k"
    case = f"GET /exports/payouts as CSV, {scale} payouts ({size / 1e6:,.0f} MB): {way}"
    growth_mb = (rss.peak - rss.before) / 1e6
    return [
        Figure("queries", f"export: {case}", shape, rows / seconds, "rows/s"),
        Figure("queries", f"export: peak RSS above the RSS before, {case}", shape, growth_mb, "MB",
               baseline_name="before", baseline=rss.before / 1e6, target=f"< {RSS_GROWTH_LIMIT_MB} MB",
               met=growth_mb < RSS_GROWTH_LIMIT_MB),
    ]  # fmt: skip
