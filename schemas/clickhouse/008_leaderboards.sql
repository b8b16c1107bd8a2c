-- The published client's leaderboards (API.md §7): volume, revenue, attributions and referred users per user, and
-- payouts in on-chain currencies per user. Written by views of the tables the stream workers write; nothing reads raw
-- events at query time.

-- One user's figures on one side: `side` 'user' (as the end user: its own conversions, payouts earned as a user) or
-- 'affiliate' (as a referrer: the conversions of the users below it in referral chains, payouts earned as an
-- affiliate, the users it referred). Every source writes its own columns and leaves the others at their defaults:
--   volume, revenue   args.value.amount, args.revenue.amount of conversions (0 without them); own conversions at
--                     level 0, referred ones at the level of the chain the affiliate stood at (as rN_volume of §4,
--                     the conversions affiliate_volumes holds: those with a positive base under a conversion rule);
--   value_currency, value_chain, revenue_currency, revenue_chain   the `currency.identifier` (lowercase) and
--                     `currency.chain_identifier` those amounts name ('' none): the leaderboards' currency filter;
--   attributions      conversions with a payout to the user on that side (payouts' role);
--   referred_users, removed_users   referrals made by the user, and those of them removed since.
CREATE TABLE IF NOT EXISTS leaderboard_figures
(
    project_id String,
    side LowCardinality(String),
    user_identifier_type LowCardinality(String),
    user_identifier String,
    level UInt8 DEFAULT 0,
    value_currency String DEFAULT '',
    value_chain String DEFAULT '',
    revenue_currency String DEFAULT '',
    revenue_chain String DEFAULT '',
    volume Decimal(76, 18) DEFAULT 0,
    revenue Decimal(76, 18) DEFAULT 0,
    attributions UInt64 DEFAULT 0,
    referred_users UInt64 DEFAULT 0,
    removed_users UInt64 DEFAULT 0
)
ENGINE = SummingMergeTree
ORDER BY (project_id, side, user_identifier_type, user_identifier, level, value_currency, value_chain,
          revenue_currency, revenue_chain)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS leaderboard_own_mv TO leaderboard_figures AS
SELECT project_id, 'user' AS side, user_identifier_type, user_identifier,
       lower(JSONExtractString(args, 'value', 'currency', 'identifier')) AS value_currency,
       trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'currency', 'chain_identifier')) AS value_chain,
       lower(JSONExtractString(args, 'revenue', 'currency', 'identifier')) AS revenue_currency,
       trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'currency', 'chain_identifier')) AS revenue_chain,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18) AS volume,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'amount')), 18) AS revenue
FROM conversions;

-- A delivery's conversions are inserted before its affiliate_volumes (stream_workers.processor.TABLES, one insert after
-- the other, on the shard of their project): the conversions of the inserted volumes are there to join. The
-- subqueries of affiliate_volumes read the inserted block only, so the conversions are looked up by the sorting key.
CREATE MATERIALIZED VIEW IF NOT EXISTS leaderboard_referred_mv TO leaderboard_figures AS
SELECT v.project_id AS project_id, 'affiliate' AS side, v.affiliate_identifier_type AS user_identifier_type,
       v.affiliate_identifier AS user_identifier, v.level AS level,
       lower(JSONExtractString(c.args, 'value', 'currency', 'identifier')) AS value_currency,
       trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'currency', 'chain_identifier')) AS value_chain,
       lower(JSONExtractString(c.args, 'revenue', 'currency', 'identifier')) AS revenue_currency,
       trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'currency', 'chain_identifier')) AS revenue_chain,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'amount')), 18) AS volume,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'amount')), 18) AS revenue
FROM affiliate_volumes AS v
INNER JOIN (
    SELECT project_id, timestamp, dedup_id, args FROM conversions
    WHERE project_id IN (SELECT project_id FROM affiliate_volumes)
      AND timestamp IN (SELECT happened_at FROM affiliate_volumes)
      AND dedup_id IN (SELECT source_id FROM affiliate_volumes)
) AS c ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id;

-- One row per conversion and recipient: a conversion's payouts are written in one insert (one per table per delivery),
-- so grouping the inserted block by conversion counts each conversion once per user and role.
CREATE MATERIALIZED VIEW IF NOT EXISTS leaderboard_attributions_mv TO leaderboard_figures AS
SELECT project_id, role AS side, recipient_identifier_type AS user_identifier_type,
       recipient_identifier AS user_identifier, toUInt64(1) AS attributions
FROM payouts WHERE source_type = 'conversion'
GROUP BY project_id, role, recipient_identifier_type, recipient_identifier, source_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS leaderboard_referrals_mv TO leaderboard_figures AS
SELECT project_id, 'affiliate' AS side, referrer_identifier_type AS user_identifier_type,
       referrer_identifier AS user_identifier, toUInt64(1) AS referred_users
FROM referrals;

CREATE MATERIALIZED VIEW IF NOT EXISTS leaderboard_removals_mv TO leaderboard_figures AS
SELECT project_id, 'affiliate' AS side, referrer_identifier_type AS user_identifier_type,
       referrer_identifier AS user_identifier, toUInt64(1) AS removed_users
FROM referral_removals;

-- Payouts in on-chain currencies (raw token units) per user, role and currency (its address, lowercase), all time and
-- per hour: GET /payouts/leaderboard/{payouts,users}?currency_address=... read them as the point_totals_by_user*
-- tables of 001 for points.
CREATE TABLE IF NOT EXISTS token_totals_by_user
(
    project_id String,
    role LowCardinality(String),
    currency String,
    recipient_identifier_type LowCardinality(String),
    recipient_identifier String,
    currency_chain_id Int64,
    amount Decimal(76, 18),
    payouts UInt64
)
ENGINE = SummingMergeTree
ORDER BY (project_id, role, currency, recipient_identifier_type, recipient_identifier, currency_chain_id)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS token_totals_by_user_mv TO token_totals_by_user AS
SELECT project_id, role, lower(currency) AS currency, recipient_identifier_type, recipient_identifier,
       currency_chain_id, amount, toUInt64(1) AS payouts
FROM payouts WHERE currency != 'point';

CREATE TABLE IF NOT EXISTS token_totals_by_user_hour
(
    project_id String,
    role LowCardinality(String),
    currency String,
    hour DateTime('UTC'),
    recipient_identifier_type LowCardinality(String),
    recipient_identifier String,
    currency_chain_id Int64,
    amount Decimal(76, 18),
    payouts UInt64
)
ENGINE = SummingMergeTree
ORDER BY (project_id, role, currency, hour, recipient_identifier_type, recipient_identifier, currency_chain_id)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS token_totals_by_user_hour_mv TO token_totals_by_user_hour AS
SELECT project_id, role, lower(currency) AS currency, toStartOfHour(happened_at) AS hour, recipient_identifier_type,
       recipient_identifier, currency_chain_id, amount, toUInt64(1) AS payouts
FROM payouts WHERE currency != 'point';

-- The backfill of the rows written before (run it while no workers write, see docs/operations.md, "Migrations"):
-- emptied first, so that a retry after a failure starts it over; not deduplicated, so that a retry's identical block
-- is written.
-- These are written out, not `-- backfill:` (schemas/clickhouse/__init__.py): their queries are not their views' (no
-- aliases, column lists; the referred figures joined from conversions, attributions counted over the distinct
-- conversions of the whole table where a view groups the inserted block), and an applied migration stays as it ran.
TRUNCATE TABLE leaderboard_figures;

INSERT INTO leaderboard_figures (project_id, side, user_identifier_type, user_identifier, value_currency, value_chain,
                                 revenue_currency, revenue_chain, volume, revenue) SETTINGS insert_deduplicate = 0
SELECT project_id, 'user', user_identifier_type, user_identifier,
       lower(JSONExtractString(args, 'value', 'currency', 'identifier')),
       trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'currency', 'chain_identifier')),
       lower(JSONExtractString(args, 'revenue', 'currency', 'identifier')),
       trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'currency', 'chain_identifier')),
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18),
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'amount')), 18)
FROM conversions;

INSERT INTO leaderboard_figures (project_id, side, user_identifier_type, user_identifier, level, value_currency,
                                 value_chain, revenue_currency, revenue_chain, volume, revenue)
SETTINGS insert_deduplicate = 0
SELECT c.project_id, 'affiliate', v.affiliate_identifier_type, v.affiliate_identifier, v.level,
       lower(JSONExtractString(c.args, 'value', 'currency', 'identifier')),
       trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'currency', 'chain_identifier')),
       lower(JSONExtractString(c.args, 'revenue', 'currency', 'identifier')),
       trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'currency', 'chain_identifier')),
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'amount')), 18),
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'amount')), 18)
FROM conversions AS c
INNER JOIN affiliate_volumes AS v
    ON v.project_id = c.project_id AND v.happened_at = c.timestamp AND v.source_id = c.dedup_id;

INSERT INTO leaderboard_figures (project_id, side, user_identifier_type, user_identifier, attributions)
SETTINGS insert_deduplicate = 0
SELECT project_id, role, recipient_identifier_type, recipient_identifier, count()
FROM (
    SELECT DISTINCT project_id, role, recipient_identifier_type, recipient_identifier, source_id FROM payouts
    WHERE source_type = 'conversion'
)
GROUP BY project_id, role, recipient_identifier_type, recipient_identifier;

INSERT INTO leaderboard_figures (project_id, side, user_identifier_type, user_identifier, referred_users)
SETTINGS insert_deduplicate = 0
SELECT project_id, 'affiliate', referrer_identifier_type, referrer_identifier, toUInt64(1) FROM referrals;

INSERT INTO leaderboard_figures (project_id, side, user_identifier_type, user_identifier, removed_users)
SETTINGS insert_deduplicate = 0
SELECT project_id, 'affiliate', referrer_identifier_type, referrer_identifier, toUInt64(1) FROM referral_removals;

TRUNCATE TABLE token_totals_by_user;

INSERT INTO token_totals_by_user SETTINGS insert_deduplicate = 0
SELECT project_id, role, lower(currency), recipient_identifier_type, recipient_identifier, currency_chain_id, amount,
       toUInt64(1)
FROM payouts WHERE currency != 'point';

TRUNCATE TABLE token_totals_by_user_hour;

INSERT INTO token_totals_by_user_hour SETTINGS insert_deduplicate = 0
SELECT project_id, role, lower(currency), toStartOfHour(happened_at), recipient_identifier_type, recipient_identifier,
       currency_chain_id, amount, toUInt64(1)
FROM payouts WHERE currency != 'point';

-- down
DROP VIEW IF EXISTS token_totals_by_user_hour_mv;
DROP TABLE IF EXISTS token_totals_by_user_hour;
DROP VIEW IF EXISTS token_totals_by_user_mv;
DROP TABLE IF EXISTS token_totals_by_user;
DROP VIEW IF EXISTS leaderboard_removals_mv;
DROP VIEW IF EXISTS leaderboard_referrals_mv;
DROP VIEW IF EXISTS leaderboard_attributions_mv;
DROP VIEW IF EXISTS leaderboard_referred_mv;
DROP VIEW IF EXISTS leaderboard_own_mv;
DROP TABLE IF EXISTS leaderboard_figures;
