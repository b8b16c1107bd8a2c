"""Topic names and partitioning keys of the event log, shared by the producer and the workers.

`rewards.events` carries every record of `schemas.records` (conversion, code_use, codes_created,
affiliate, claim_check), keyed by project id so that one project's records stay in order on one
partition. A message is one accepted batch (or state change): a JSON array of records, written in a
Kafka transaction; consumers read with isolation.level=read_committed.
"""

EVENTS_TOPIC = "rewards.events"
# What the workers set aside: one message per dead letter, the `dead_letters` row as JSON (project_id,
# record_type, source_id, reason, payload, delivery, failed_at), keyed like the events; kept 90 days.
DLQ_TOPIC = "rewards.events.dlq"
DLQ_RETENTION_MS = 90 * 86_400_000


def partition_key(project_id: str) -> bytes:
    return project_id.encode()
