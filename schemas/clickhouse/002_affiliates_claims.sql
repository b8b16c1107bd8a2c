-- Affiliates (API.md §4) and claim checks (API.md §5). Like 001, every table is written by the
-- stream workers, one insert per table per delivery under the delivery's deduplication token.

-- Affiliate figures are keyed by `user_key`, a 128-bit hash of (identifier type, identifier): grouping
-- and joining 100,000s of affiliates on it is several times faster than on the identifier strings.

-- Registered affiliates and their attributes: the listing filters and sorts here.
CREATE TABLE IF NOT EXISTS affiliates
(
    project_id String,
    user_identifier_type LowCardinality(String),
    user_identifier String,
    user_key UInt128 DEFAULT reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)),
    id String,
    name Nullable(String),
    status LowCardinality(String),
    region Nullable(String),
    audience Nullable(String),
    tax_status LowCardinality(String),
    tier Nullable(String),
    created_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY (project_id, user_identifier_type, user_identifier)
-- Small granules: a listing page looks up its 10-100 affiliates by key, scattered across the table.
SETTINGS non_replicated_deduplication_window = 100000, index_granularity = 256;

-- Referral codes by owner: the listing's search matches a substring of one of an affiliate's codes.
CREATE TABLE IF NOT EXISTS referral_codes
(
    project_id String,
    owner_identifier_type LowCardinality(String),
    owner_identifier String,
    code String,
    created_at DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY (project_id, owner_identifier_type, owner_identifier, code)
SETTINGS non_replicated_deduplication_window = 100000, index_granularity = 256;

-- Who referred whom (one row per referred user: a user is referred once).
CREATE TABLE IF NOT EXISTS referrals
(
    project_id String,
    user_identifier_type LowCardinality(String),
    user_identifier String,
    referrer_identifier_type LowCardinality(String),
    referrer_identifier String,
    code String,
    referred_at DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY (project_id, referrer_identifier_type, referrer_identifier, user_identifier)
SETTINGS non_replicated_deduplication_window = 100000;

-- One row per conversion and affiliate of its referrer chain: the base amount at that level.
CREATE TABLE IF NOT EXISTS affiliate_volumes
(
    project_id String,
    source_id String,
    level UInt8,
    affiliate_identifier_type LowCardinality(String),
    affiliate_identifier String,
    base Decimal(76, 18),
    happened_at DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY (project_id, happened_at, source_id, level)
SETTINGS non_replicated_deduplication_window = 100000;

-- All-time figures per affiliate: the listing's default window reads one row per affiliate.
CREATE TABLE IF NOT EXISTS affiliate_stats
(
    project_id String,
    user_key UInt128,
    r1_volume Decimal(76, 18),
    r2_volume Decimal(76, 18),
    r3_volume Decimal(76, 18),
    r4_volume Decimal(76, 18),
    earnings Decimal(76, 18),
    referred_users UInt64
)
ENGINE = SummingMergeTree
ORDER BY (project_id, user_key)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_volumes_mv TO affiliate_stats AS
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
       if(level = 1, base, 0) AS r1_volume, if(level = 2, base, 0) AS r2_volume,
       if(level = 3, base, 0) AS r3_volume, if(level = 4, base, 0) AS r4_volume,
       toDecimal256(0, 18) AS earnings, toUInt64(0) AS referred_users
FROM affiliate_volumes;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_earnings_mv TO affiliate_stats AS
SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)) AS user_key,
       toDecimal256(0, 18) AS r1_volume, toDecimal256(0, 18) AS r2_volume, toDecimal256(0, 18) AS r3_volume,
       toDecimal256(0, 18) AS r4_volume, amount AS earnings, toUInt64(0) AS referred_users
FROM payouts WHERE currency = 'point' AND role = 'affiliate';

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_referrals_mv TO affiliate_stats AS
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)) AS user_key,
       toDecimal256(0, 18) AS r1_volume, toDecimal256(0, 18) AS r2_volume, toDecimal256(0, 18) AS r3_volume,
       toDecimal256(0, 18) AS r4_volume, toDecimal256(0, 18) AS earnings, toUInt64(1) AS referred_users
FROM referrals;

-- The same figures per day (UTC): a window (7d, 30d, dateFrom/dateTo) reads only its days.
CREATE TABLE IF NOT EXISTS affiliate_stats_daily
(
    project_id String,
    day Date32,
    user_key UInt128,
    r1_volume Decimal(76, 18),
    r2_volume Decimal(76, 18),
    r3_volume Decimal(76, 18),
    r4_volume Decimal(76, 18),
    earnings Decimal(76, 18)
)
ENGINE = SummingMergeTree
ORDER BY (project_id, day, user_key)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_daily_volumes_mv TO affiliate_stats_daily AS
SELECT project_id, toDate32(happened_at) AS day, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
       if(level = 1, base, 0) AS r1_volume, if(level = 2, base, 0) AS r2_volume,
       if(level = 3, base, 0) AS r3_volume, if(level = 4, base, 0) AS r4_volume,
       toDecimal256(0, 18) AS earnings
FROM affiliate_volumes;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_daily_earnings_mv TO affiliate_stats_daily AS
SELECT project_id, toDate32(happened_at) AS day, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)) AS user_key,
       toDecimal256(0, 18) AS r1_volume, toDecimal256(0, 18) AS r2_volume, toDecimal256(0, 18) AS r3_volume,
       toDecimal256(0, 18) AS r4_volume, amount AS earnings
FROM payouts WHERE currency = 'point' AND role = 'affiliate';

-- The same daily figures ordered by affiliate: a window's figures of a page's 10-100 affiliates read only
-- their rows.
CREATE TABLE IF NOT EXISTS affiliate_stats_daily_by_user
(
    project_id String,
    user_key UInt128,
    day Date32,
    r1_volume Decimal(76, 18),
    r2_volume Decimal(76, 18),
    r3_volume Decimal(76, 18),
    r4_volume Decimal(76, 18),
    earnings Decimal(76, 18)
)
ENGINE = SummingMergeTree
ORDER BY (project_id, user_key, day)
SETTINGS non_replicated_deduplication_window = 100000, index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_daily_by_user_volumes_mv TO affiliate_stats_daily_by_user AS
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
       toDate32(happened_at) AS day, if(level = 1, base, 0) AS r1_volume, if(level = 2, base, 0) AS r2_volume,
       if(level = 3, base, 0) AS r3_volume, if(level = 4, base, 0) AS r4_volume, toDecimal256(0, 18) AS earnings
FROM affiliate_volumes;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_daily_by_user_earnings_mv TO affiliate_stats_daily_by_user AS
SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)) AS user_key,
       toDate32(happened_at) AS day, toDecimal256(0, 18) AS r1_volume, toDecimal256(0, 18) AS r2_volume,
       toDecimal256(0, 18) AS r3_volume, toDecimal256(0, 18) AS r4_volume, amount AS earnings
FROM payouts WHERE currency = 'point' AND role = 'affiliate';

-- The listing's read model: one row per affiliate (after merges) with its all-time figures beside the
-- attributes the listing filters, searches and sorts on, so a page is one scan of the project's rows
-- (FINAL folds the unmerged ones) with no GROUP BY and no join. Each source writes its own columns and
-- leaves the others empty ('', NULL, 0): `max` keeps the registration's attributes, `sum` adds figures.
-- `status` is '' until the user registers as an affiliate.
CREATE TABLE IF NOT EXISTS affiliate_listing
(
    project_id String,
    user_key UInt128,
    user_identifier_type SimpleAggregateFunction(max, LowCardinality(String)),
    user_identifier SimpleAggregateFunction(max, String),
    name SimpleAggregateFunction(max, Nullable(String)),
    status SimpleAggregateFunction(max, LowCardinality(String)),
    region SimpleAggregateFunction(max, Nullable(String)),
    audience SimpleAggregateFunction(max, Nullable(String)),
    tax_status SimpleAggregateFunction(max, LowCardinality(String)),
    tier SimpleAggregateFunction(max, Nullable(String)),
    created_at SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    r1_volume SimpleAggregateFunction(sum, Decimal(76, 18)),
    r2_volume SimpleAggregateFunction(sum, Decimal(76, 18)),
    r3_volume SimpleAggregateFunction(sum, Decimal(76, 18)),
    r4_volume SimpleAggregateFunction(sum, Decimal(76, 18)),
    total_volume SimpleAggregateFunction(sum, Decimal(76, 18)),
    earnings SimpleAggregateFunction(sum, Decimal(76, 18)),
    referred_users SimpleAggregateFunction(sum, UInt64)
)
ENGINE = AggregatingMergeTree
ORDER BY (project_id, user_key)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_listing_attributes_mv TO affiliate_listing AS
SELECT project_id, reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)) AS user_key,
       user_identifier_type, user_identifier, name, status, region, audience, tax_status, tier, created_at
FROM affiliates;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_listing_volumes_mv TO affiliate_listing AS
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
       if(level = 1, base, 0) AS r1_volume, if(level = 2, base, 0) AS r2_volume,
       if(level = 3, base, 0) AS r3_volume, if(level = 4, base, 0) AS r4_volume, base AS total_volume
FROM affiliate_volumes;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_listing_earnings_mv TO affiliate_listing AS
SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)) AS user_key,
       amount AS earnings
FROM payouts WHERE currency = 'point' AND role = 'affiliate';

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_listing_referrals_mv TO affiliate_listing AS
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)) AS user_key,
       toUInt64(1) AS referred_users
FROM referrals;

-- Claim checks: every change of a check is a new row with a higher version; reads use FINAL and
-- see the latest. The sorting key starts with the user, so a user's history reads only their rows.
CREATE TABLE IF NOT EXISTS claim_checks
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
    reason LowCardinality(String),
    status LowCardinality(String),
    hash Nullable(String),
    source_id String,
    created_at DateTime64(3, 'UTC'),
    claimed_at Nullable(DateTime64(3, 'UTC')),
    version UInt32
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, user_identifier_type, user_identifier, id)
-- A user has tens of checks: small granules, and compressed blocks no larger than one of them, let a read
-- decompress ~256 rows of each column instead of 8192 (a table created before keeps its granularity).
SETTINGS non_replicated_deduplication_window = 100000, index_granularity = 256, min_compress_block_size = 4096;
