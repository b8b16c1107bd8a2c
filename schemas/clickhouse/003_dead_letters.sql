-- Records the workers set aside instead of writing (API.md §3's limits keep them rare): a record that
-- cannot be read, or whose payouts cannot be computed or stored (e.g. beyond the payout limit). Written
-- in the same delivery as the rest, under its token, so a dead letter is recorded exactly once too.
CREATE TABLE IF NOT EXISTS dead_letters
(
    project_id String,
    record_type LowCardinality(String),
    source_id String,
    reason String,
    payload String,
    delivery String,
    failed_at DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY (project_id, failed_at, source_id)
TTL toDateTime(failed_at) + INTERVAL 90 DAY
SETTINGS non_replicated_deduplication_window = 100000;
