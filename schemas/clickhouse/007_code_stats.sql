-- Affiliate codes, rebates and removed referrals (API.md §7).

-- The referral code a payout goes through ('' none; payouts written before carry none): the code of the converting
-- user's referral on a conversion's payouts (its level-1 commission, the rebate that splits it, the others), the
-- code used on a code use's referral rewards.
ALTER TABLE payouts ADD COLUMN IF NOT EXISTS code String DEFAULT '';

-- Referrals removed (`DELETE /referral_codes/{code}/referrals`): the user may be referred again, and is counted out of
-- the referrer's and the code's referred users; what was paid before stays. `referred_at` is the removed referral's
-- (a `referrals` row is removed when its user and referred_at match one here).
CREATE TABLE IF NOT EXISTS referral_removals
(
    project_id String,
    id String,
    use_id String,
    code String,
    referrer_identifier String,
    referrer_identifier_type LowCardinality(String),
    user_identifier String,
    user_identifier_type LowCardinality(String),
    referred_at DateTime64(3, 'UTC'),
    removed_at DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY (project_id, user_identifier, referred_at)
SETTINGS non_replicated_deduplication_window = 100000;

-- Per code (by each of its names: a renamed code's figures are the sum over all its names, which stay its own):
-- users referred through it, those of them whose referral was removed since, and what its owner earned through it
-- in points (the level-1 commissions on conversions of the users it referred, less their rebates, and the owner's
-- referral rewards of its uses). `GET /referral_codes` and `GET /affiliates/{user}` read it.
CREATE TABLE IF NOT EXISTS code_stats
(
    project_id String,
    code String,
    referred UInt64,
    removed UInt64,
    earnings Decimal(76, 18)
)
ENGINE = SummingMergeTree
ORDER BY (project_id, code)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS code_stats_referrals_mv TO code_stats AS
SELECT project_id, code, toUInt64(1) AS referred, toUInt64(0) AS removed, toDecimal256(0, 18) AS earnings
FROM referrals;

CREATE MATERIALIZED VIEW IF NOT EXISTS code_stats_removals_mv TO code_stats AS
SELECT project_id, code, toUInt64(0) AS referred, toUInt64(1) AS removed, toDecimal256(0, 18) AS earnings
FROM referral_removals;

CREATE MATERIALIZED VIEW IF NOT EXISTS code_stats_earnings_mv TO code_stats AS
SELECT project_id, code, toUInt64(0) AS referred, toUInt64(0) AS removed, amount AS earnings
FROM payouts
WHERE code != '' AND currency = 'point' AND role = 'affiliate'
  AND (kind = 'referral_reward' OR (kind = 'affiliate_commission' AND level = 1));

-- The referred users of each affiliate count out those whose referral was removed: referred_users - removed_users.
ALTER TABLE affiliate_stats ADD COLUMN IF NOT EXISTS removed_users UInt64 DEFAULT 0;
ALTER TABLE affiliate_listing ADD COLUMN IF NOT EXISTS removed_users SimpleAggregateFunction(sum, UInt64) DEFAULT 0;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_removals_mv TO affiliate_stats AS
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)) AS user_key,
       toUInt64(1) AS removed_users
FROM referral_removals;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_listing_removals_mv TO affiliate_listing AS
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)) AS user_key,
       toUInt64(1) AS removed_users
FROM referral_removals;

-- The backfill of the referrals written before (run it while no workers write, see docs/operations.md,
-- "Migrations"): emptied first, so that a retry after a failure starts it over; not deduplicated, so that a retry's
-- identical block is written. Earnings through a code count from this migration on (payouts written before carry
-- no code).
TRUNCATE TABLE code_stats;

-- backfill: code_stats_referrals_mv

-- down
DROP VIEW IF EXISTS affiliate_listing_removals_mv;
DROP VIEW IF EXISTS affiliate_stats_removals_mv;
ALTER TABLE affiliate_listing DROP COLUMN IF EXISTS removed_users;
ALTER TABLE affiliate_stats DROP COLUMN IF EXISTS removed_users;
DROP VIEW IF EXISTS code_stats_earnings_mv;
DROP VIEW IF EXISTS code_stats_removals_mv;
DROP VIEW IF EXISTS code_stats_referrals_mv;
DROP TABLE IF EXISTS code_stats;
DROP TABLE IF EXISTS referral_removals;
ALTER TABLE payouts DROP COLUMN IF EXISTS code;
