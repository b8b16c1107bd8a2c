"""How long an event takes to reach each stage of its way, from the moment the edge received its batch (the
`received_ms` every conversion record carries): `published` (the log took the batch; the edge), `consumed` (a worker
holds the delivery), `written` (its warehouse inserts are done: its payouts are visible), `marked` (the state store
has it processed: `GET /events/status` says so). Exported as one Prometheus histogram, `rewards_event_stage_seconds`,
so that a freshness figure can be split into where its time went (issue 32). The clocks of the edge and the workers
are both wall clocks: on separate machines their skew is in the figures (a negative span counts as 0).

The workers observe once per delivery, for its oldest record (the delivery's worst latency), not once per record:
a delivery's records reach each stage together, and one observation per stage keeps the cost per event nil."""

import time

from prometheus_client import Histogram

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.35, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 10.0, 30.0, 60.0)
STAGE_SECONDS = Histogram(
    "rewards_event_stage_seconds",
    "Seconds from the edge's receipt of a batch to each stage of its events' way (workers: a delivery's oldest)",
    ["stage"],
    buckets=BUCKETS,
)
PUBLISHED = STAGE_SECONDS.labels("published")
CONSUMED = STAGE_SECONDS.labels("consumed")
WRITTEN = STAGE_SECONDS.labels("written")
MARKED = STAGE_SECONDS.labels("marked")


def reached(stage: Histogram, received_ms: int | None) -> None:
    """`stage` reached now by what the edge received at `received_ms` (None: nothing to time)."""
    if received_ms is not None:
        stage.observe(max(0.0, time.time() - received_ms / 1000))


def oldest_received_ms(records: list) -> int | None:
    """The earliest `received_ms` among the records that carry one (conversions), None if none does."""
    return min((ms for record in records if (ms := getattr(record, "received_ms", None)) is not None), default=None)
