"""Topic names and partitioning keys of the event log, shared by the producer and the workers.

`rewards.events` carries every record of `schemas.records` (conversion, code_use, codes_created,
affiliate, claim_check), keyed by project id so that one project's records stay in order on one
partition. A message is one accepted batch (or state change): a JSON array of records, written in a
Kafka transaction; consumers read with isolation.level=read_committed.
"""

EVENTS_TOPIC = "rewards.events"


def partition_key(project_id: str) -> bytes:
    return project_id.encode()
