-- STAGED, not applied yet: the numbered migrations (and tests/test_migrations.py) stop at version 3. To apply it,
-- move this file to schemas/clickhouse/004_dedup_ids.sql, bump test_migrations.py's expected version to 4, and wire
-- rewards.dedup_archive.WarehouseDedupArchive into open_redis_state (ingest API and workers).
-- The dedup window past Redis's hot window (API.md §3): every dedup id the workers wrote, by project and id,
-- for the window. Fed by the workers' exactly-once inserts through the views below (a conversion, or a
-- conversion set aside as a dead letter: `failed`). The ingest edge asks it once per batch about the ids Redis
-- no longer knows (rewards.dedup_archive); the query bounds the window exactly, the TTL only frees the disk:
-- a window longer than 35 days needs `ALTER TABLE dedup_ids MODIFY TTL toDateTime(accepted_at) + INTERVAL N DAY`.
-- Granules of 1,024 rows: a batch looks up ~100 ids scattered across the table (256 measured no faster, 4x the index RAM).
CREATE TABLE IF NOT EXISTS dedup_ids
(
    project_id String,
    dedup_id String,
    accepted_at DateTime64(3, 'UTC'),
    failed UInt8
)
ENGINE = ReplacingMergeTree(accepted_at)
ORDER BY (project_id, dedup_id)
TTL toDateTime(accepted_at) + INTERVAL 35 DAY
SETTINGS non_replicated_deduplication_window = 100000, index_granularity = 1024;

CREATE MATERIALIZED VIEW IF NOT EXISTS dedup_ids_from_conversions TO dedup_ids AS
SELECT project_id, dedup_id, received_at AS accepted_at, toUInt8(0) AS failed
FROM conversions;

CREATE MATERIALIZED VIEW IF NOT EXISTS dedup_ids_from_dead_letters TO dedup_ids AS
SELECT project_id, source_id AS dedup_id, failed_at AS accepted_at, toUInt8(1) AS failed
FROM dead_letters
WHERE record_type = 'conversion';

-- The ids written before this migration (run it while no workers write, see README "Migrations").
TRUNCATE TABLE dedup_ids;

INSERT INTO dedup_ids SETTINGS insert_deduplicate = 0
SELECT project_id, dedup_id, received_at, toUInt8(0) FROM conversions WHERE received_at > now() - INTERVAL 35 DAY;

INSERT INTO dedup_ids SETTINGS insert_deduplicate = 0
SELECT project_id, source_id, failed_at, toUInt8(1) FROM dead_letters
WHERE record_type = 'conversion' AND failed_at > now() - INTERVAL 35 DAY;

-- down
DROP VIEW IF EXISTS dedup_ids_from_dead_letters;
DROP VIEW IF EXISTS dedup_ids_from_conversions;
DROP TABLE IF EXISTS dedup_ids
