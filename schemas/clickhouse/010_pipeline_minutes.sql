-- The pipeline's health per project and minute, read by the operator console (GET /api/v1/console/health). The
-- service's Prometheus metrics are process-wide: a project label on them would make series without bound, so the
-- per-project figures are counted here, by views on the rows the workers write (one row per project and minute).
--   accepted: events (conversions and tracking events) by the minute the ingest edge accepted them (received_at),
--     counted once the workers have written them
--   processed, delay_ms, max_delay_ms: events by the minute the workers wrote them (the insert's time), and how long
--     each waited from its acceptance to that write, summed and at most (the console's freshness)
--   dead_letters: records set aside by the workers, by the minute they were
-- A delivery written again after a crash counts once: its inserts carry the delivery's deduplication token, which
-- the views' blocks inherit (deduplicate_blocks_in_dependent_materialized_views), whatever the insert's time.
CREATE TABLE IF NOT EXISTS pipeline_minutes
(
    project_id String,
    minute DateTime('UTC'),
    accepted SimpleAggregateFunction(sum, UInt64),
    processed SimpleAggregateFunction(sum, UInt64),
    delay_ms SimpleAggregateFunction(sum, UInt64),
    max_delay_ms SimpleAggregateFunction(max, UInt64),
    dead_letters SimpleAggregateFunction(sum, UInt64)
)
ENGINE = AggregatingMergeTree
ORDER BY (project_id, minute)
TTL minute + INTERVAL 30 DAY
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS pipeline_conversions_accepted_mv TO pipeline_minutes AS
SELECT project_id, toStartOfMinute(received_at) AS minute, count() AS accepted, toUInt64(0) AS processed,
       toUInt64(0) AS delay_ms, toUInt64(0) AS max_delay_ms, toUInt64(0) AS dead_letters
FROM conversions GROUP BY project_id, minute;

CREATE MATERIALIZED VIEW IF NOT EXISTS pipeline_conversions_processed_mv TO pipeline_minutes AS
SELECT project_id, toStartOfMinute(now()) AS minute, toUInt64(0) AS accepted, count() AS processed,
       sum(toUInt64(greatest(0, dateDiff('millisecond', received_at, now64(3))))) AS delay_ms,
       max(toUInt64(greatest(0, dateDiff('millisecond', received_at, now64(3))))) AS max_delay_ms,
       toUInt64(0) AS dead_letters
FROM conversions GROUP BY project_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS pipeline_tracking_accepted_mv TO pipeline_minutes AS
SELECT project_id, toStartOfMinute(received_at) AS minute, count() AS accepted, toUInt64(0) AS processed,
       toUInt64(0) AS delay_ms, toUInt64(0) AS max_delay_ms, toUInt64(0) AS dead_letters
FROM tracking_events GROUP BY project_id, minute;

CREATE MATERIALIZED VIEW IF NOT EXISTS pipeline_tracking_processed_mv TO pipeline_minutes AS
SELECT project_id, toStartOfMinute(now()) AS minute, toUInt64(0) AS accepted, count() AS processed,
       sum(toUInt64(greatest(0, dateDiff('millisecond', received_at, now64(3))))) AS delay_ms,
       max(toUInt64(greatest(0, dateDiff('millisecond', received_at, now64(3))))) AS max_delay_ms,
       toUInt64(0) AS dead_letters
FROM tracking_events GROUP BY project_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS pipeline_dead_letters_mv TO pipeline_minutes AS
SELECT project_id, toStartOfMinute(failed_at) AS minute, toUInt64(0) AS accepted, toUInt64(0) AS processed,
       toUInt64(0) AS delay_ms, toUInt64(0) AS max_delay_ms, count() AS dead_letters
FROM dead_letters GROUP BY project_id, minute

-- down
DROP VIEW IF EXISTS pipeline_dead_letters_mv;
DROP VIEW IF EXISTS pipeline_tracking_processed_mv;
DROP VIEW IF EXISTS pipeline_tracking_accepted_mv;
DROP VIEW IF EXISTS pipeline_conversions_processed_mv;
DROP VIEW IF EXISTS pipeline_conversions_accepted_mv;
DROP TABLE IF EXISTS pipeline_minutes
