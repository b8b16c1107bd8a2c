-- Conversions and payouts, written by the stream workers in batches, one insert per table per
-- delivery, with the delivery's insert_deduplication_token: a redelivered batch writes nothing twice
-- (the views below deduplicate too, with deduplicate_blocks_in_dependent_materialized_views = 1).

CREATE TABLE IF NOT EXISTS conversions
(
    project_id String,
    dedup_id String,
    name String,
    user_identifier String,
    user_identifier_type LowCardinality(String),
    timestamp DateTime64(3, 'UTC'),
    received_at DateTime64(3, 'UTC'),
    batch_id String,
    args String,
    metadata String
)
ENGINE = MergeTree
ORDER BY (project_id, timestamp, dedup_id)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE TABLE IF NOT EXISTS payouts
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
    created_at DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY (project_id, happened_at, payout_id)
SETTINGS non_replicated_deduplication_window = 100000;

-- All-time points per project: GET /payouts/summary reads one row per project.
CREATE TABLE IF NOT EXISTS point_totals_by_project
(
    project_id String,
    amount Decimal(76, 18)
)
ENGINE = SummingMergeTree
ORDER BY project_id
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS point_totals_by_project_mv TO point_totals_by_project AS
SELECT project_id, amount FROM payouts WHERE currency = 'point';

-- All-time points per user, kind and role: /payouts/totals and the all-time leaderboards.
CREATE TABLE IF NOT EXISTS point_totals_by_user
(
    project_id String,
    role LowCardinality(String),
    recipient_identifier_type LowCardinality(String),
    recipient_identifier String,
    kind LowCardinality(String),
    amount Decimal(76, 18),
    payouts UInt64
)
ENGINE = SummingMergeTree
ORDER BY (project_id, role, recipient_identifier_type, recipient_identifier, kind)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS point_totals_by_user_mv TO point_totals_by_user AS
SELECT project_id, role, recipient_identifier_type, recipient_identifier, kind, amount, toUInt64(1) AS payouts
FROM payouts WHERE currency = 'point';

-- Points per user and hour: leaderboards bounded by from/to read whole hours here and only the
-- partial hours at the edges from raw payouts.
CREATE TABLE IF NOT EXISTS point_totals_by_user_hour
(
    project_id String,
    role LowCardinality(String),
    hour DateTime('UTC'),
    recipient_identifier_type LowCardinality(String),
    recipient_identifier String,
    amount Decimal(76, 18),
    payouts UInt64
)
ENGINE = SummingMergeTree
ORDER BY (project_id, role, hour, recipient_identifier_type, recipient_identifier)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS point_totals_by_user_hour_mv TO point_totals_by_user_hour AS
SELECT project_id, role, toStartOfHour(happened_at) AS hour, recipient_identifier_type, recipient_identifier,
       amount, toUInt64(1) AS payouts
FROM payouts WHERE currency = 'point';
