"""Topic names and partitioning of the event log, shared by the producer and the workers.

`rewards.events` carries every record of `schemas.records`. A message is one accepted batch (or state change): a
JSON array of records, written in a Kafka transaction; consumers read with isolation.level=read_committed.

Where a message goes:
- a batch's **conversions** are spread by user (`shard_of`) over REWARDS_CONVERSION_SHARDS partitions, from the
  project's own on: one message per partition the batch touches, all in the batch's one transaction, each still
  keyed by its project id (the partition is given), so one project is processed by up to that many workers, and each
  user's conversions stay in order (a cap cuts a user's later conversion, never an earlier);
- **everything else** (code uses, codes, affiliates, claim checks, reversals, decisions, tracking) is keyed by
  project (`partition_key`) and keeps its project's order on one partition.

What is read across that split comes from the state store, not the log's order: a conversion's referral chain, tiers
and codes (written there when a code use or an affiliate is accepted), caps and budgets (atomic per project). A
reversal can reach its worker before its event's partition wrote the event: it waits for it
(stream_workers.handlers.reversal).
"""

import hashlib

EVENTS_TOPIC = "rewards.events"
# What the workers set aside: one message per dead letter, the `dead_letters` row as JSON (project_id,
# record_type, source_id, reason, payload, delivery, failed_at), keyed like the events; kept 90 days.
DLQ_TOPIC = "rewards.events.dlq"
DLQ_RETENTION_MS = 90 * 86_400_000


def partition_key(project_id: str) -> bytes:
    return project_id.encode()


def shard_of(project_id: str, user_identifier_type: str, user_identifier: str, shards: int) -> int:
    """The shard (0 <= n < shards) of a user's conversions, its partition's place after the project's own: stable for
    as long as the shard and partition counts are (a retry of a batch goes where its first attempt went, so the
    workers see both copies in order and write it once)."""
    if shards <= 1:
        return 0
    key = "\x00".join((project_id, user_identifier_type, user_identifier)).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") % shards
