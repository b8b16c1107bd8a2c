-- The affiliate portal (API.md §7: the published client's GET /affiliate-portal/...): an affiliate's volume, revenue,
-- attributions and earnings per level of its referrer chain and per day, each conversion counted as its event carried
-- them. Volume is the event's args.value.amount, revenue its args.revenue.amount: neither is in affiliate_volumes or
-- payouts (which hold the base and the payout), so two views join the delivery's own conversions to them. A
-- delivery inserts `conversions` before `payouts` and `affiliate_volumes` (stream_workers/processor.py), and in a
-- view the source table names the inserted block only, subqueries included: each join reads the conversions of the
-- block's ids through the sorting key (project_id, timestamp, dedup_id), not the table.

-- Per affiliate (user_key), day, level and converting user (trader_key) and conversion name: the conversions counted
-- for the affiliate at that level (those of affiliate_volumes: a positive base under a conversion rule), with the
-- value and revenue their events carried. Stats, the breakdown, the referral tree and new traders read an affiliate's
-- rows here.
CREATE TABLE IF NOT EXISTS affiliate_portal_daily
(
    project_id String,
    user_key UInt128,
    day Date32,
    level UInt8,
    trader_key UInt128,
    name String,
    volume Decimal(76, 18),
    revenue Decimal(76, 18),
    attributions UInt64
)
ENGINE = SummingMergeTree
ORDER BY (project_id, user_key, day, level, trader_key, name)
SETTINGS non_replicated_deduplication_window = 100000, index_granularity = 256;

-- An amount of the event's args (`value` or `revenue`): §3's `{"amount": "<decimal>"}`, or a JSON number as a tracking
-- event may carry it (ingest_api/events/validation.py); absent: 0. The edge accepted only plain decimals of at most
-- 18 places below 10^30, which Decimal(76, 18) holds exactly.
CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_portal_daily_mv TO affiliate_portal_daily AS
SELECT v.project_id AS project_id,
       reinterpretAsUInt128(sipHash128(v.affiliate_identifier_type, v.affiliate_identifier)) AS user_key,
       toDate32(v.happened_at) AS day, v.level AS level,
       reinterpretAsUInt128(sipHash128(c.user_identifier_type, c.user_identifier)) AS trader_key, c.name AS name,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'amount')), 18) AS volume,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'amount')), 18) AS revenue,
       toUInt64(1) AS attributions
FROM affiliate_volumes AS v
INNER JOIN (
    SELECT project_id, dedup_id, timestamp, name, user_identifier_type, user_identifier, args FROM conversions
    WHERE (project_id, timestamp, dedup_id) IN (SELECT project_id, happened_at, source_id FROM affiliate_volumes)
    LIMIT 1 BY project_id, timestamp, dedup_id
) AS c ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id;

-- What an affiliate earned as one (role 'affiliate': commissions at levels 1-4, referral rewards at level 0) per day,
-- level, conversion name ('' for a code use's reward) and currency ('point', or a token's address, its amounts raw
-- units); and, for each commission, its conversion's value and revenue: the payout-eligible figures (a conversion
-- whose commission at that level was paid to the affiliate).
CREATE TABLE IF NOT EXISTS affiliate_portal_earnings_daily
(
    project_id String,
    user_key UInt128,
    day Date32,
    level UInt8,
    name String,
    currency String,
    currency_chain_id Int64,
    currency_name String,
    currency_decimals UInt8,
    amount Decimal(76, 18),
    paid_volume Decimal(76, 18),
    paid_revenue Decimal(76, 18),
    paid_attributions UInt64
)
ENGINE = SummingMergeTree
ORDER BY (project_id, user_key, day, level, name, currency, currency_chain_id, currency_name, currency_decimals)
SETTINGS non_replicated_deduplication_window = 100000, index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_portal_earnings_daily_mv TO affiliate_portal_earnings_daily AS
SELECT p.project_id AS project_id,
       reinterpretAsUInt128(sipHash128(p.recipient_identifier_type, p.recipient_identifier)) AS user_key,
       toDate32(p.happened_at) AS day, p.level AS level, c.name AS name, p.currency AS currency,
       p.currency_chain_id AS currency_chain_id, p.currency_name AS currency_name,
       p.currency_decimals AS currency_decimals, p.amount AS amount,
       if(p.kind = 'affiliate_commission',
          toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'amount')), 18),
          toDecimal256(0, 18)) AS paid_volume,
       if(p.kind = 'affiliate_commission',
          toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'amount')), 18),
          toDecimal256(0, 18)) AS paid_revenue,
       toUInt64(p.kind = 'affiliate_commission') AS paid_attributions
FROM payouts AS p
LEFT JOIN (
    SELECT project_id, dedup_id, timestamp, name, args FROM conversions
    WHERE (project_id, timestamp, dedup_id) IN (
        SELECT project_id, happened_at, source_id FROM payouts WHERE source_type = 'conversion' AND role = 'affiliate')
    LIMIT 1 BY project_id, timestamp, dedup_id
) AS c ON c.project_id = p.project_id AND c.timestamp = p.happened_at AND c.dedup_id = p.source_id
WHERE p.role = 'affiliate';

-- The project's total stats read one row per affiliate (FINAL), as the §4 listing does: each source writes its own
-- columns and leaves the others empty ('', NULL, 0, {}); `max` keeps the registration's attributes, `sum` adds
-- figures. Level-1 figures only (each conversion counts once, for its user's direct referrer), fed by
-- affiliate_portal_daily's own inserts (a view of a view's target sees what it writes); earnings (role 'affiliate')
-- per currency: 'point', or '<decimals>:<name>' of a token, in raw units.
CREATE TABLE IF NOT EXISTS affiliate_portal_totals
(
    project_id String,
    user_key UInt128,
    status SimpleAggregateFunction(max, LowCardinality(String)),
    region SimpleAggregateFunction(max, Nullable(String)),
    audience SimpleAggregateFunction(max, Nullable(String)),
    referred_users SimpleAggregateFunction(sum, UInt64),
    removed_users SimpleAggregateFunction(sum, UInt64),
    volume SimpleAggregateFunction(sum, Decimal(76, 18)),
    revenue SimpleAggregateFunction(sum, Decimal(76, 18)),
    attributions SimpleAggregateFunction(sum, UInt64),
    earnings SimpleAggregateFunction(sumMap, Map(String, Decimal(76, 18)))
)
ENGINE = AggregatingMergeTree
ORDER BY (project_id, user_key)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_portal_totals_attributes_mv TO affiliate_portal_totals AS
SELECT project_id, reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)) AS user_key, status, region,
       audience
FROM affiliates;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_portal_totals_referrals_mv TO affiliate_portal_totals AS
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)) AS user_key,
       toUInt64(1) AS referred_users
FROM referrals;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_portal_totals_removals_mv TO affiliate_portal_totals AS
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)) AS user_key,
       toUInt64(1) AS removed_users
FROM referral_removals;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_portal_totals_volumes_mv TO affiliate_portal_totals AS
SELECT project_id, user_key, volume, revenue, attributions FROM affiliate_portal_daily WHERE level = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_portal_totals_earnings_mv TO affiliate_portal_totals AS
SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)) AS user_key,
       map(if(currency = 'point', 'point', concat(toString(currency_decimals), ':', currency_name)), amount) AS earnings
FROM payouts WHERE role = 'affiliate';

-- Who referred whom, by referrer key: the referral tree goes down a level per lookup of its referrers' keys (the
-- `referrals` table is sorted by the referrer's type and identifier, which a set of keys cannot use), in small
-- granules and small compressed blocks (a tree reads a few rows of each of hundreds of referrers, scattered over
-- the table by their hashes: each costs a granule and the block around it). A referral removed since (API.md §7
-- deleteReferral) has `removed` 1: its row of referral_removals (of the same referrer, user and time) folds into it.
CREATE TABLE IF NOT EXISTS referral_edges
(
    project_id String,
    referrer_key UInt128,
    user_key UInt128,
    referred_at DateTime64(3, 'UTC'),
    user_identifier_type SimpleAggregateFunction(max, LowCardinality(String)),
    user_identifier SimpleAggregateFunction(max, String),
    removed SimpleAggregateFunction(max, UInt8)
)
ENGINE = AggregatingMergeTree
ORDER BY (project_id, referrer_key, user_key, referred_at)
SETTINGS non_replicated_deduplication_window = 100000, index_granularity = 32, min_compress_block_size = 4096,
    max_compress_block_size = 16384;

CREATE MATERIALIZED VIEW IF NOT EXISTS referral_edges_mv TO referral_edges AS
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)) AS referrer_key,
       reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)) AS user_key, referred_at,
       user_identifier_type, user_identifier, toUInt8(0) AS removed
FROM referrals;

CREATE MATERIALIZED VIEW IF NOT EXISTS referral_edges_removals_mv TO referral_edges AS
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)) AS referrer_key,
       reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)) AS user_key, referred_at,
       toUInt8(1) AS removed
FROM referral_removals;

-- Every user's own conversions per day and name (what it traded as an end user, referred or not).
CREATE TABLE IF NOT EXISTS user_conversions_daily
(
    project_id String,
    user_key UInt128,
    day Date32,
    name String,
    volume Decimal(76, 18),
    revenue Decimal(76, 18),
    conversions UInt64
)
ENGINE = SummingMergeTree
ORDER BY (project_id, user_key, day, name)
SETTINGS non_replicated_deduplication_window = 100000, index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS user_conversions_daily_mv TO user_conversions_daily AS
SELECT project_id, reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)) AS user_key,
       toDate32(timestamp) AS day, name,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18) AS volume,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'amount')), 18) AS revenue,
       toUInt64(1) AS conversions
FROM conversions;

-- The backfill of what was written before (run it while no workers write, see docs/operations.md, "Migrations"):
-- each table emptied first, so that a retry after a failure starts it over; not deduplicated, so that a retry's
-- identical blocks are written. affiliate_portal_totals gets its level-1 figures from its view of the rows inserted
-- into affiliate_portal_daily, the rest from their sources.
TRUNCATE TABLE affiliate_portal_totals;

-- affiliate_portal_daily and affiliate_portal_earnings_daily are written out, not `-- backfill:`
-- (schemas/clickhouse/__init__.py): their views narrow the conversions they join to the keys of the inserted
-- block, which these queries over whole tables leave out.
TRUNCATE TABLE affiliate_portal_daily;

INSERT INTO affiliate_portal_daily SETTINGS insert_deduplicate = 0
SELECT v.project_id AS project_id,
       reinterpretAsUInt128(sipHash128(v.affiliate_identifier_type, v.affiliate_identifier)) AS user_key,
       toDate32(v.happened_at) AS day, v.level AS level,
       reinterpretAsUInt128(sipHash128(c.user_identifier_type, c.user_identifier)) AS trader_key, c.name AS name,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'amount')), 18) AS volume,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'amount')), 18) AS revenue,
       toUInt64(1) AS attributions
FROM affiliate_volumes AS v
INNER JOIN (
    SELECT project_id, dedup_id, timestamp, name, user_identifier_type, user_identifier, args FROM conversions
    LIMIT 1 BY project_id, timestamp, dedup_id
) AS c ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id;

TRUNCATE TABLE affiliate_portal_earnings_daily;

INSERT INTO affiliate_portal_earnings_daily SETTINGS insert_deduplicate = 0
SELECT p.project_id AS project_id,
       reinterpretAsUInt128(sipHash128(p.recipient_identifier_type, p.recipient_identifier)) AS user_key,
       toDate32(p.happened_at) AS day, p.level AS level, c.name AS name, p.currency AS currency,
       p.currency_chain_id AS currency_chain_id, p.currency_name AS currency_name,
       p.currency_decimals AS currency_decimals, p.amount AS amount,
       if(p.kind = 'affiliate_commission',
          toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'amount')), 18),
          toDecimal256(0, 18)) AS paid_volume,
       if(p.kind = 'affiliate_commission',
          toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'amount')), 18),
          toDecimal256(0, 18)) AS paid_revenue,
       toUInt64(p.kind = 'affiliate_commission') AS paid_attributions
FROM payouts AS p
LEFT JOIN (
    SELECT project_id, dedup_id, timestamp, name, args FROM conversions LIMIT 1 BY project_id, timestamp, dedup_id
) AS c ON c.project_id = p.project_id AND c.timestamp = p.happened_at AND c.dedup_id = p.source_id
WHERE p.role = 'affiliate';

-- backfill: affiliate_portal_totals_attributes_mv (project_id, user_key, status, region, audience)

-- backfill: affiliate_portal_totals_referrals_mv (project_id, user_key, referred_users)

-- backfill: affiliate_portal_totals_removals_mv (project_id, user_key, removed_users)

-- backfill: affiliate_portal_totals_earnings_mv (project_id, user_key, earnings)

TRUNCATE TABLE referral_edges;

-- backfill: referral_edges_mv

-- backfill: referral_edges_removals_mv (project_id, referrer_key, user_key, referred_at, removed)

TRUNCATE TABLE user_conversions_daily;

-- backfill: user_conversions_daily_mv

-- down
DROP VIEW IF EXISTS user_conversions_daily_mv;
DROP TABLE IF EXISTS user_conversions_daily;
DROP VIEW IF EXISTS referral_edges_removals_mv;
DROP VIEW IF EXISTS referral_edges_mv;
DROP TABLE IF EXISTS referral_edges;
DROP VIEW IF EXISTS affiliate_portal_totals_earnings_mv;
DROP VIEW IF EXISTS affiliate_portal_totals_volumes_mv;
DROP VIEW IF EXISTS affiliate_portal_totals_removals_mv;
DROP VIEW IF EXISTS affiliate_portal_totals_referrals_mv;
DROP VIEW IF EXISTS affiliate_portal_totals_attributes_mv;
DROP TABLE IF EXISTS affiliate_portal_totals;
DROP VIEW IF EXISTS affiliate_portal_earnings_daily_mv;
DROP TABLE IF EXISTS affiliate_portal_earnings_daily;
DROP VIEW IF EXISTS affiliate_portal_daily_mv;
DROP TABLE IF EXISTS affiliate_portal_daily;
