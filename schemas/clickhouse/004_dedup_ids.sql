-- What the workers have written, by project, kind and id, for the dedup window (API.md §3): the warehouse's own
-- answer to "was this paid already?", which holds even when Redis forgets (it keeps exact ids for a short hot
-- window only, and may lose its last second in a crash).
--   kind 'event': a conversion's dedup_id (failed = 1: set aside as a dead letter). The ingest edge asks about
--     the ids Redis no longer knows, once per batch (rewards.dedup_archive); the workers about every id of a
--     delivery Redis has not marked done, and drop those found.
--   kind 'code_use' (use_id), 'affiliate' (id), 'codes_created' (its first code): state changes, which reach the
--     log at least once (the Redis outbox may publish one again); the workers drop those found.
-- The workers insert these rows last in each delivery, under the delivery's token: an id found here means every
-- row of its record was written. The query bounds the window exactly; the TTL only frees the disk (a window
-- longer than 35 days needs `ALTER TABLE dedup_ids MODIFY TTL toDateTime(accepted_at) + INTERVAL N DAY`).
-- Granules of 1,024 rows: a batch looks up ~100 ids scattered across the table (005 makes them 256 rows in 4 KB
-- compression blocks).
CREATE TABLE IF NOT EXISTS dedup_ids
(
    project_id String,
    kind LowCardinality(String),
    dedup_id String,
    accepted_at DateTime64(3, 'UTC'),
    failed UInt8
)
ENGINE = ReplacingMergeTree(accepted_at)
ORDER BY (project_id, kind, dedup_id)
TTL toDateTime(accepted_at) + INTERVAL 35 DAY
SETTINGS non_replicated_deduplication_window = 100000, index_granularity = 1024;

-- The use each referral comes from ('' for those before): a delivery written again after a crash finds its own
-- referrals and writes them once, where a use of another user or past the code's max_uses is refused.
ALTER TABLE referrals ADD COLUMN IF NOT EXISTS use_id String DEFAULT '';

-- Where each delivery of a partition ends, recorded before it is written (stream_workers.plans.WarehousePlans):
-- kept here, beside the rows it protects, and not in Redis, whose crash may lose its last second. The claim's insert
-- carries the plan key as its deduplication token: the first claim wins.
CREATE TABLE IF NOT EXISTS worker_plans
(
    plan_key String,
    last_offset Int64,
    created_at DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY plan_key
TTL toDateTime(created_at) + INTERVAL 7 DAY
SETTINGS non_replicated_deduplication_window = 100000;

-- The ids written before this migration (run it while no workers write, see docs/operations.md, "Migrations").
TRUNCATE TABLE dedup_ids;

INSERT INTO dedup_ids SETTINGS insert_deduplicate = 0
SELECT project_id, 'event', dedup_id, received_at, toUInt8(0) FROM conversions
WHERE received_at > now() - INTERVAL 35 DAY;

INSERT INTO dedup_ids SETTINGS insert_deduplicate = 0
SELECT project_id, 'event', source_id, failed_at, toUInt8(1) FROM dead_letters
WHERE record_type = 'conversion' AND failed_at > now() - INTERVAL 35 DAY;

INSERT INTO dedup_ids SETTINGS insert_deduplicate = 0
SELECT DISTINCT project_id, 'code_use', source_id, happened_at, toUInt8(0) FROM payouts
WHERE source_type = 'code_use' AND happened_at > now() - INTERVAL 35 DAY;

-- down
DROP TABLE IF EXISTS worker_plans;
ALTER TABLE referrals DROP COLUMN IF EXISTS use_id;
DROP TABLE IF EXISTS dedup_ids
