"""Batch plans: where each batch of a partition ends, recorded before the batch is written.

A worker writes a batch of a partition, starting at offset `first`, under the token
`{topic}:{partition}:{first}-{last}`. If it dies after writing and before its offsets are committed,
the partition is read again from `first`, by it or another worker, possibly in batches of other
sizes. Writing the same records under another token would write them twice, so the end of every
batch is recorded first, and a batch starting at an offset that already has a plan ends where the
plan says. The first plan recorded for an offset wins, so two workers holding the same partition
during a rebalance agree too.

Plans are needed only until the offsets past them are committed (seconds); they are kept for days. The PlanStore
adapters hold them: rewards.adapters.embedded.sqlite_plans, rewards.adapters.warehouse_plans.

The production workers keep them in the warehouse they protect (`WarehousePlans`), not in Redis: a crash that
loses Redis's last second would lose the plan of a delivery being written, and its rows already inserted would
be written again under another token.
"""


def plan_key(topic: str, partition: int, first_offset: int) -> str:
    return f"{topic}:{partition}:{first_offset}"
