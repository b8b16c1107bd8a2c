"""Topic names and partitioning keys of the event log, shared by the producer and the workers.

`rewards.events` carries every record of `schemas.records` (conversions and code uses), keyed
by project id so that one project's records stay in order on one partition.
"""

EVENTS_TOPIC = "rewards.events"


def partition_key(project_id: str) -> bytes:
    return project_id.encode()
