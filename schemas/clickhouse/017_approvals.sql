-- Approvals (API.md §9): payouts held for an operator's decision. `pending_payouts` holds each as its event paid it
-- (a payouts row) with its status: `pending` when held (version 1), then `approved` or `rejected` (version 2: the
-- latest kept); GET /payouts/pending-approval lists those still pending. `payout_decisions` keeps each decision
-- (who decided is the key's project; why: its reason). An approved payout is written to `payouts` then, a rejected one
-- to `rejected_payouts` (`rejected_by_operator`), as every paid or refused payout.
CREATE TABLE IF NOT EXISTS pending_payouts
(
    project_id String,
    payout_id String,
    source_id String,
    source_type LowCardinality(String),
    kind LowCardinality(String),
    role LowCardinality(String),
    level UInt8,
    recipient_identifier String,
    recipient_identifier_type LowCardinality(String),
    amount Decimal(76, 18),
    currency String,
    currency_chain_id Int64,
    currency_name String,
    currency_decimals UInt8,
    happened_at DateTime64(3, 'UTC'),
    created_at DateTime64(3, 'UTC'),
    code String,
    status LowCardinality(String),
    version UInt32
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, payout_id)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE TABLE IF NOT EXISTS payout_decisions
(
    project_id String,
    id String,
    payout_id String,
    decision LowCardinality(String),
    reason Nullable(String),
    decided_at DateTime64(3, 'UTC'),
    payout String
)
ENGINE = MergeTree
ORDER BY (project_id, payout_id, id)
SETTINGS non_replicated_deduplication_window = 100000;

-- down
DROP TABLE IF EXISTS payout_decisions;
DROP TABLE IF EXISTS pending_payouts;
