-- Public claimable rewards (API.md §9, GET /claimable-rewards without a key): a user's claim checks across every
-- project, read by user. `claim_checks` is sorted by project first; this copy of each check's versions is sorted by
-- user, so the read touches the user's rows only (the latest version of each check kept, as in claim_checks).
CREATE TABLE IF NOT EXISTS user_claim_checks
(
    project_id String,
    user_identifier_type LowCardinality(String),
    user_identifier String,
    id String,
    currency_address String,
    currency_chain_id Int64,
    currency_name String,
    currency_decimals UInt8,
    amount UInt256,
    status LowCardinality(String),
    expires_at Nullable(DateTime64(3, 'UTC')),
    version UInt32
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (user_identifier_type, user_identifier, project_id, id)
SETTINGS non_replicated_deduplication_window = 100000, index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS user_claim_checks_mv TO user_claim_checks AS
SELECT project_id, user_identifier_type, user_identifier, id, currency_address, currency_chain_id, currency_name,
       currency_decimals, amount, status, expires_at, version
FROM claim_checks;

-- The checks written before (run it while no workers write, see docs/operations.md, "Migrations"): emptied first, so
-- that a retry after a failure starts it over.
TRUNCATE TABLE user_claim_checks;

-- backfill: user_claim_checks_mv

-- down
DROP VIEW IF EXISTS user_claim_checks_mv;
DROP TABLE IF EXISTS user_claim_checks;
