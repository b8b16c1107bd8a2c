"""Where an event's time goes: the servers' stage histograms (rewards.stages, `rewards_event_stage_seconds` in
/metrics) read before and after a load, and each stage's p50 / p99 over that load estimated from its buckets.

A service of several processes (`ingest-api --processes N`) answers /metrics from one of them at a time: each is
read until every process has answered (told apart by `process_start_time_seconds`), and their histograms summed."""

import httpx
from prometheus_client.parser import text_string_to_metric_families

STAGES = ("published", "consumed", "written", "marked")
METRIC = "rewards_event_stage_seconds"
Histograms = dict[str, dict[float, float]]  # stage → upper bound → cumulative count


def scrape(urls: list[tuple[str, int]]) -> Histograms:
    """The stage histograms summed over the services at `urls`, each (base URL, its number of processes)."""
    total: Histograms = {}
    for url, processes in urls:
        for histograms in _processes(url, processes).values():
            for stage, buckets in histograms.items():
                into = total.setdefault(stage, {})
                for bound, count in buckets.items():
                    into[bound] = into.get(bound, 0.0) + count
    return total


def breakdown(before: Histograms, after: Histograms) -> dict[str, tuple[float, float, int]]:
    """Each stage counted between the two reads: (p50 ms, p99 ms, observations)."""
    found = {}
    for stage in STAGES:
        earlier = before.get(stage, {})
        buckets = {bound: count - earlier.get(bound, 0.0) for bound, count in after.get(stage, {}).items()}
        count = buckets.get(float("inf"), 0.0)
        if count:
            found[stage] = (_quantile(buckets, 0.5) * 1000, _quantile(buckets, 0.99) * 1000, int(count))
    return found


def _processes(url: str, processes: int, attempts: int = 40) -> dict[float, Histograms]:
    seen: dict[float, Histograms] = {}
    with httpx.Client(timeout=10, headers={"Connection": "close"}) as client:
        for _ in range(attempts):
            started, histograms = _parse(client.get(f"{url}/metrics").text)
            seen[started] = histograms
            if len(seen) >= processes:
                break
    return seen


def _parse(text: str) -> tuple[float, Histograms]:
    started, histograms = 0.0, {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "process_start_time_seconds":
                started = sample.value
            elif sample.name == f"{METRIC}_bucket":
                histograms.setdefault(sample.labels["stage"], {})[float(sample.labels["le"])] = sample.value
    return started, histograms


def _quantile(buckets: dict[float, float], q: float) -> float:
    """As Prometheus's histogram_quantile: linear within the bucket the rank falls in (in +Inf: the last bound)."""
    bounds = sorted(buckets)
    rank = q * buckets[float("inf")]
    lower, below = 0.0, 0.0
    for bound in bounds:
        if buckets[bound] >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / max(buckets[bound] - below, 1e-9)
        lower, below = bound, buckets[bound]
    return lower
