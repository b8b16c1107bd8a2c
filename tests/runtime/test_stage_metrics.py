"""The stage histograms (rewards.stages) in /metrics once events flow, on both shapes: the edge's `published` on the
ingest service, the workers' `consumed`, `written` and `marked` where the workers serve theirs (the embedded server's
own /metrics; the production shape's REWARDS_WORKER_METRICS_PORT)."""

import re
import time

from tests.conftest import event
from tests.support.harness import metric_total

CONFIG = {"conversions": [{"event_name": "purchase", "base": {"fixed": "1"}}]}


def counted(urls: list[str], stage: str, timeout_s: float = 10) -> bool:
    """Whether the /metrics of `urls` count the stage at least once between them, within `timeout_s`: `marked` is
    observed just after the status says processed."""
    deadline = time.monotonic() + timeout_s
    pattern = re.compile(rf'^rewards_event_stage_seconds_count{{stage="{stage}"}} (\S+)$', re.MULTILINE)
    while time.monotonic() < deadline:
        if metric_total(urls, pattern) >= 1:
            return True
        time.sleep(0.1)
    return False


def test_the_stage_histograms_count_the_events_way(server, api):
    api.put("/projects/config", json=CONFIG)
    assert api.post("/events/batch", json={"events": [event("stage-1")]}).status_code == 200
    api.wait_processed("stage-1", timeout_s=60)
    edge = server.urls["ingest"]
    workers = [edge] if server.shape == "embedded" else server.worker_metrics_urls
    assert counted([edge], "published")
    for stage in ("consumed", "written", "marked"):
        assert counted(workers, stage), stage
