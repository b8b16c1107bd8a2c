-- Reversals (API.md §9: a refund, a chargeback, a cancelled order). A reversal takes back a share of an event's
-- payouts; the workers write what it takes back as rows of the tables the figures are built from, at the event's
-- time, so that every sum (all time and in every window) drops by exactly that, and no count moves:
--   * `reversals`: one row per reversal applied (its event, reason, fraction and the event's reversed share before
--     and after it);
--   * `payouts`: per payout of the event, a row of the same id stem, kind, level and recipient with the amount taken
--     back, negative, and `reversal` = the reversal's id ('' on every payout as paid). The counts of payouts and of
--     attributions leave these rows out; a commission's reversal row also carries the share of its conversion's
--     counted volume and revenue it takes back (the affiliate portal's paid volume);
--   * `affiliate_volumes`: per level of the event's chain, the base taken back, with the share of the conversion's
--     raw and counted volume and revenue (the views joined the conversion for those: a reversal row carries its own);
--   * `conversion_reversals`: the converting user's own figures (its volume, its revenue), one row per reversal;
--   * `debts`: what a reversal could not take out of an open claim check (raw units owed, positive), and what later
--     checks settled of it (negative): GET /claim-checks/totals' `debt` is their sum per currency.
-- The views below are those of 001, 008, 009 and 012 that count rows or join a conversion's amounts, made anew to
-- read a reversal row's own amounts and count it nowhere; the views that only sum amounts need no change.
-- (Made while no workers write, as 012: see docs/operations.md, "Migrations".)

CREATE TABLE IF NOT EXISTS reversals
(
    project_id String,
    id String,
    dedup_id String,
    reason String,
    fraction Decimal(76, 18),
    reversed_before Decimal(76, 18),
    reversed_after Decimal(76, 18),
    reversed_at DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY (project_id, dedup_id, id)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE TABLE IF NOT EXISTS conversion_reversals
(
    project_id String,
    reversal String,
    dedup_id String,
    user_identifier_type LowCardinality(String),
    user_identifier String,
    timestamp DateTime64(3, 'UTC'),
    name String,
    args String,
    volume Decimal(76, 18),
    revenue Decimal(76, 18),
    counted_volume Decimal(76, 18),
    counted_revenue Decimal(76, 18)
)
ENGINE = MergeTree
ORDER BY (project_id, timestamp, dedup_id, reversal)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE TABLE IF NOT EXISTS debts
(
    project_id String,
    user_identifier_type LowCardinality(String),
    user_identifier String,
    currency_address String,
    currency_chain_id Int64,
    currency_name String,
    currency_decimals UInt8,
    amount Int256,
    source String,
    created_at DateTime64(3, 'UTC')
)
ENGINE = MergeTree
ORDER BY (project_id, user_identifier_type, user_identifier, currency_address)
SETTINGS non_replicated_deduplication_window = 100000;

ALTER TABLE payouts
    ADD COLUMN IF NOT EXISTS reversal String DEFAULT '',
    ADD COLUMN IF NOT EXISTS counted_volume Decimal(76, 18) DEFAULT 0,
    ADD COLUMN IF NOT EXISTS counted_revenue Decimal(76, 18) DEFAULT 0;

ALTER TABLE affiliate_volumes
    ADD COLUMN IF NOT EXISTS reversal String DEFAULT '',
    ADD COLUMN IF NOT EXISTS volume Decimal(76, 18) DEFAULT 0,
    ADD COLUMN IF NOT EXISTS revenue Decimal(76, 18) DEFAULT 0,
    ADD COLUMN IF NOT EXISTS counted_volume Decimal(76, 18) DEFAULT 0,
    ADD COLUMN IF NOT EXISTS counted_revenue Decimal(76, 18) DEFAULT 0;

ALTER TABLE recipient_payouts ADD COLUMN IF NOT EXISTS reversal String DEFAULT '';

-- A reversal finds its event's conversion by dedup_id alone (its time is not in the request).
ALTER TABLE conversions ADD INDEX IF NOT EXISTS conversions_dedup_id dedup_id TYPE bloom_filter(0.01) GRANULARITY 1;

ALTER TABLE conversions MATERIALIZE INDEX conversions_dedup_id SETTINGS mutations_sync = 2;

DROP VIEW IF EXISTS point_totals_by_user_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS point_totals_by_user_mv TO point_totals_by_user AS
SELECT project_id, role, recipient_identifier_type, recipient_identifier, kind, amount,
       toUInt64(reversal = '') AS payouts
FROM payouts WHERE currency = 'point';

DROP VIEW IF EXISTS point_totals_by_user_hour_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS point_totals_by_user_hour_mv TO point_totals_by_user_hour AS
SELECT project_id, role, toStartOfHour(happened_at) AS hour, recipient_identifier_type, recipient_identifier,
       amount, toUInt64(reversal = '') AS payouts
FROM payouts WHERE currency = 'point';

DROP VIEW IF EXISTS token_totals_by_user_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS token_totals_by_user_mv TO token_totals_by_user AS
SELECT project_id, role, lower(currency) AS currency, recipient_identifier_type, recipient_identifier,
       currency_chain_id, amount, toUInt64(reversal = '') AS payouts
FROM payouts WHERE currency != 'point';

DROP VIEW IF EXISTS token_totals_by_user_hour_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS token_totals_by_user_hour_mv TO token_totals_by_user_hour AS
SELECT project_id, role, lower(currency) AS currency, toStartOfHour(happened_at) AS hour, recipient_identifier_type,
       recipient_identifier, currency_chain_id, amount, toUInt64(reversal = '') AS payouts
FROM payouts WHERE currency != 'point';

DROP VIEW IF EXISTS leaderboard_attributions_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS leaderboard_attributions_mv TO leaderboard_figures AS
SELECT project_id, role AS side, recipient_identifier_type AS user_identifier_type,
       recipient_identifier AS user_identifier, toUInt64(1) AS attributions
FROM payouts WHERE source_type = 'conversion' AND reversal = ''
GROUP BY project_id, role, recipient_identifier_type, recipient_identifier, source_id;

DROP VIEW IF EXISTS recipient_payouts_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS recipient_payouts_mv TO recipient_payouts AS
SELECT p.project_id AS project_id, p.recipient_identifier_type AS recipient_identifier_type,
       p.recipient_identifier AS recipient_identifier, p.happened_at AS happened_at, p.payout_id AS payout_id,
       p.kind AS kind, p.role AS role, p.level AS level, p.amount AS amount, p.currency AS currency,
       p.currency_chain_id AS currency_chain_id,
       if(p.source_type = 'code_use', 'referral_reward', c.name) AS conversion_name, p.reversal AS reversal
FROM payouts AS p
LEFT ANY JOIN (
    SELECT project_id, timestamp, dedup_id, name FROM conversions
    WHERE (project_id, timestamp, dedup_id) IN (SELECT project_id, happened_at, source_id FROM payouts)
) AS c ON c.project_id = p.project_id AND c.timestamp = p.happened_at AND c.dedup_id = p.source_id;

DROP VIEW IF EXISTS leaderboard_referred_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS leaderboard_referred_mv TO leaderboard_figures AS
SELECT v.project_id AS project_id, 'affiliate' AS side, v.affiliate_identifier_type AS user_identifier_type,
       v.affiliate_identifier AS user_identifier, v.level AS level,
       lower(JSONExtractString(c.args, 'value', 'currency', 'identifier')) AS value_currency,
       trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'currency', 'chain_identifier')) AS value_chain,
       lower(JSONExtractString(c.args, 'revenue', 'currency', 'identifier')) AS revenue_currency,
       trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'currency', 'chain_identifier')) AS revenue_chain,
       if(v.reversal = '', toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'amount')), 18),
          v.volume) AS volume,
       if(v.reversal = '', toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'amount')), 18),
          v.revenue) AS revenue,
       if(v.reversal = '', c.counted_volume, v.counted_volume) AS counted_volume,
       if(v.reversal = '', c.counted_revenue, v.counted_revenue) AS counted_revenue
FROM affiliate_volumes AS v
INNER JOIN (
    SELECT project_id, timestamp, dedup_id, args, counted_volume, counted_revenue FROM conversions
    WHERE project_id IN (SELECT project_id FROM affiliate_volumes)
      AND timestamp IN (SELECT happened_at FROM affiliate_volumes)
      AND dedup_id IN (SELECT source_id FROM affiliate_volumes)
) AS c ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id;

DROP VIEW IF EXISTS referrer_earnings_daily_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS referrer_earnings_daily_mv TO referrer_earnings_daily AS
SELECT v.project_id AS project_id, v.affiliate_identifier_type AS referrer_identifier_type,
       v.affiliate_identifier AS referrer_identifier,
       if(v.level = 1, c.user_identifier_type, below.affiliate_identifier_type) AS referred_identifier_type,
       if(v.level = 1, c.user_identifier, below.affiliate_identifier) AS referred_identifier,
       toDate32(v.happened_at) AS day, p.currency AS currency, p.currency_chain_id AS currency_chain_id,
       if(v.level = 1, if(v.reversal = '', c.volume, v.counted_volume), toDecimal256(0, 18)) AS direct_volume,
       if(v.level > 1, if(v.reversal = '', c.volume, v.counted_volume), toDecimal256(0, 18)) AS indirect_volume,
       if(v.level = 1, p.amount, toDecimal256(0, 18)) AS direct_commission, p.amount AS commission
FROM affiliate_volumes AS v
LEFT ANY JOIN (
    SELECT project_id, source_id, happened_at, level + 1 AS above, affiliate_identifier_type, affiliate_identifier,
           reversal
    FROM affiliate_volumes
) AS below ON below.project_id = v.project_id AND below.source_id = v.source_id AND below.happened_at = v.happened_at
    AND below.above = v.level AND below.reversal = v.reversal
LEFT ANY JOIN (
    SELECT project_id, timestamp, dedup_id, user_identifier_type, user_identifier, counted_volume AS volume
    FROM conversions
    WHERE (project_id, timestamp, dedup_id) IN (SELECT project_id, happened_at, source_id FROM affiliate_volumes)
) AS c ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id
LEFT ANY JOIN (
    SELECT project_id, source_id, happened_at, level, recipient_identifier_type, recipient_identifier, amount,
           currency, currency_chain_id, reversal
    FROM payouts
    WHERE (project_id, happened_at) IN (SELECT project_id, happened_at FROM affiliate_volumes)
      AND kind = 'affiliate_commission'
) AS p ON p.project_id = v.project_id AND p.source_id = v.source_id AND p.happened_at = v.happened_at
    AND p.level = v.level AND p.recipient_identifier_type = v.affiliate_identifier_type
    AND p.recipient_identifier = v.affiliate_identifier AND p.reversal = v.reversal;

DROP VIEW IF EXISTS affiliate_portal_daily_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_portal_daily_mv TO affiliate_portal_daily AS
SELECT v.project_id AS project_id,
       reinterpretAsUInt128(sipHash128(v.affiliate_identifier_type, v.affiliate_identifier)) AS user_key,
       toDate32(v.happened_at) AS day, v.level AS level,
       reinterpretAsUInt128(sipHash128(c.user_identifier_type, c.user_identifier)) AS trader_key, c.name AS name,
       if(v.reversal = '', c.counted_volume, v.counted_volume) AS volume,
       if(v.reversal = '', c.counted_revenue, v.counted_revenue) AS revenue,
       toUInt64(v.reversal = '') AS attributions
FROM affiliate_volumes AS v
INNER JOIN (
    SELECT project_id, dedup_id, timestamp, name, user_identifier_type, user_identifier, counted_volume,
           counted_revenue
    FROM conversions
    WHERE (project_id, timestamp, dedup_id) IN (SELECT project_id, happened_at, source_id FROM affiliate_volumes)
    LIMIT 1 BY project_id, timestamp, dedup_id
) AS c ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id;

DROP VIEW IF EXISTS affiliate_portal_earnings_daily_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_portal_earnings_daily_mv TO affiliate_portal_earnings_daily AS
SELECT p.project_id AS project_id,
       reinterpretAsUInt128(sipHash128(p.recipient_identifier_type, p.recipient_identifier)) AS user_key,
       toDate32(p.happened_at) AS day, p.level AS level, c.name AS name, p.currency AS currency,
       p.currency_chain_id AS currency_chain_id, p.currency_name AS currency_name,
       p.currency_decimals AS currency_decimals, p.amount AS amount,
       if(p.kind = 'affiliate_commission', if(p.reversal = '', c.counted_volume, p.counted_volume),
          toDecimal256(0, 18)) AS paid_volume,
       if(p.kind = 'affiliate_commission', if(p.reversal = '', c.counted_revenue, p.counted_revenue),
          toDecimal256(0, 18)) AS paid_revenue,
       toUInt64(p.kind = 'affiliate_commission' AND p.reversal = '') AS paid_attributions
FROM payouts AS p
LEFT JOIN (
    SELECT project_id, dedup_id, timestamp, name, counted_volume, counted_revenue FROM conversions
    WHERE (project_id, timestamp, dedup_id) IN (
        SELECT project_id, happened_at, source_id FROM payouts WHERE source_type = 'conversion' AND role = 'affiliate')
    LIMIT 1 BY project_id, timestamp, dedup_id
) AS c ON c.project_id = p.project_id AND c.timestamp = p.happened_at AND c.dedup_id = p.source_id
WHERE p.role = 'affiliate';

-- The converting user's own figures, from conversion_reversals (counted nowhere as conversions).
CREATE MATERIALIZED VIEW IF NOT EXISTS leaderboard_own_reversals_mv TO leaderboard_figures AS
SELECT project_id, 'user' AS side, user_identifier_type, user_identifier,
       lower(JSONExtractString(args, 'value', 'currency', 'identifier')) AS value_currency,
       trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'currency', 'chain_identifier')) AS value_chain,
       lower(JSONExtractString(args, 'revenue', 'currency', 'identifier')) AS revenue_currency,
       trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'currency', 'chain_identifier')) AS revenue_chain,
       volume, revenue, counted_volume, counted_revenue
FROM conversion_reversals;

CREATE MATERIALIZED VIEW IF NOT EXISTS user_volume_daily_reversals_mv TO user_volume_daily AS
SELECT project_id, user_identifier_type, user_identifier, toDate32(timestamp) AS day, counted_volume AS volume
FROM conversion_reversals;

CREATE MATERIALIZED VIEW IF NOT EXISTS user_conversions_daily_reversals_mv TO user_conversions_daily AS
SELECT project_id, reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)) AS user_key,
       toDate32(timestamp) AS day, name, counted_volume AS volume, counted_revenue AS revenue,
       toUInt64(0) AS conversions
FROM conversion_reversals;

-- down
-- The views back to what 012 (and 001, 008, 009 before it) made, then the reversals' tables and columns dropped
-- (the figures keep what reversal rows were summed into them: migrate down only before any reversal is processed).
DROP VIEW IF EXISTS user_conversions_daily_reversals_mv;
DROP VIEW IF EXISTS user_volume_daily_reversals_mv;
DROP VIEW IF EXISTS leaderboard_own_reversals_mv;

DROP VIEW IF EXISTS affiliate_portal_earnings_daily_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_portal_earnings_daily_mv TO affiliate_portal_earnings_daily AS
SELECT p.project_id AS project_id,
       reinterpretAsUInt128(sipHash128(p.recipient_identifier_type, p.recipient_identifier)) AS user_key,
       toDate32(p.happened_at) AS day, p.level AS level, c.name AS name, p.currency AS currency,
       p.currency_chain_id AS currency_chain_id, p.currency_name AS currency_name,
       p.currency_decimals AS currency_decimals, p.amount AS amount,
       if(p.kind = 'affiliate_commission', c.counted_volume, toDecimal256(0, 18)) AS paid_volume,
       if(p.kind = 'affiliate_commission', c.counted_revenue, toDecimal256(0, 18)) AS paid_revenue,
       toUInt64(p.kind = 'affiliate_commission') AS paid_attributions
FROM payouts AS p
LEFT JOIN (
    SELECT project_id, dedup_id, timestamp, name, counted_volume, counted_revenue FROM conversions
    WHERE (project_id, timestamp, dedup_id) IN (
        SELECT project_id, happened_at, source_id FROM payouts WHERE source_type = 'conversion' AND role = 'affiliate')
    LIMIT 1 BY project_id, timestamp, dedup_id
) AS c ON c.project_id = p.project_id AND c.timestamp = p.happened_at AND c.dedup_id = p.source_id
WHERE p.role = 'affiliate';

DROP VIEW IF EXISTS affiliate_portal_daily_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_portal_daily_mv TO affiliate_portal_daily AS
SELECT v.project_id AS project_id,
       reinterpretAsUInt128(sipHash128(v.affiliate_identifier_type, v.affiliate_identifier)) AS user_key,
       toDate32(v.happened_at) AS day, v.level AS level,
       reinterpretAsUInt128(sipHash128(c.user_identifier_type, c.user_identifier)) AS trader_key, c.name AS name,
       c.counted_volume AS volume, c.counted_revenue AS revenue, toUInt64(1) AS attributions
FROM affiliate_volumes AS v
INNER JOIN (
    SELECT project_id, dedup_id, timestamp, name, user_identifier_type, user_identifier, counted_volume,
           counted_revenue
    FROM conversions
    WHERE (project_id, timestamp, dedup_id) IN (SELECT project_id, happened_at, source_id FROM affiliate_volumes)
    LIMIT 1 BY project_id, timestamp, dedup_id
) AS c ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id;

DROP VIEW IF EXISTS referrer_earnings_daily_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS referrer_earnings_daily_mv TO referrer_earnings_daily AS
SELECT v.project_id AS project_id, v.affiliate_identifier_type AS referrer_identifier_type,
       v.affiliate_identifier AS referrer_identifier,
       if(v.level = 1, c.user_identifier_type, below.affiliate_identifier_type) AS referred_identifier_type,
       if(v.level = 1, c.user_identifier, below.affiliate_identifier) AS referred_identifier,
       toDate32(v.happened_at) AS day, p.currency AS currency, p.currency_chain_id AS currency_chain_id,
       if(v.level = 1, c.volume, toDecimal256(0, 18)) AS direct_volume,
       if(v.level > 1, c.volume, toDecimal256(0, 18)) AS indirect_volume,
       if(v.level = 1, p.amount, toDecimal256(0, 18)) AS direct_commission, p.amount AS commission
FROM affiliate_volumes AS v
LEFT ANY JOIN (
    SELECT project_id, source_id, happened_at, level + 1 AS above, affiliate_identifier_type, affiliate_identifier
    FROM affiliate_volumes
) AS below ON below.project_id = v.project_id AND below.source_id = v.source_id AND below.happened_at = v.happened_at
    AND below.above = v.level
LEFT ANY JOIN (
    SELECT project_id, timestamp, dedup_id, user_identifier_type, user_identifier, counted_volume AS volume
    FROM conversions
    WHERE (project_id, timestamp, dedup_id) IN (SELECT project_id, happened_at, source_id FROM affiliate_volumes)
) AS c ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id
LEFT ANY JOIN (
    SELECT project_id, source_id, happened_at, level, recipient_identifier_type, recipient_identifier, amount,
           currency, currency_chain_id
    FROM payouts
    WHERE (project_id, happened_at) IN (SELECT project_id, happened_at FROM affiliate_volumes)
      AND kind = 'affiliate_commission'
) AS p ON p.project_id = v.project_id AND p.source_id = v.source_id AND p.happened_at = v.happened_at
    AND p.level = v.level AND p.recipient_identifier_type = v.affiliate_identifier_type
    AND p.recipient_identifier = v.affiliate_identifier;

DROP VIEW IF EXISTS leaderboard_referred_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS leaderboard_referred_mv TO leaderboard_figures AS
SELECT v.project_id AS project_id, 'affiliate' AS side, v.affiliate_identifier_type AS user_identifier_type,
       v.affiliate_identifier AS user_identifier, v.level AS level,
       lower(JSONExtractString(c.args, 'value', 'currency', 'identifier')) AS value_currency,
       trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'currency', 'chain_identifier')) AS value_chain,
       lower(JSONExtractString(c.args, 'revenue', 'currency', 'identifier')) AS revenue_currency,
       trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'currency', 'chain_identifier')) AS revenue_chain,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'amount')), 18) AS volume,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'amount')), 18) AS revenue,
       c.counted_volume AS counted_volume, c.counted_revenue AS counted_revenue
FROM affiliate_volumes AS v
INNER JOIN (
    SELECT project_id, timestamp, dedup_id, args, counted_volume, counted_revenue FROM conversions
    WHERE project_id IN (SELECT project_id FROM affiliate_volumes)
      AND timestamp IN (SELECT happened_at FROM affiliate_volumes)
      AND dedup_id IN (SELECT source_id FROM affiliate_volumes)
) AS c ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id;

DROP VIEW IF EXISTS recipient_payouts_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS recipient_payouts_mv TO recipient_payouts AS
SELECT p.project_id AS project_id, p.recipient_identifier_type AS recipient_identifier_type,
       p.recipient_identifier AS recipient_identifier, p.happened_at AS happened_at, p.payout_id AS payout_id,
       p.kind AS kind, p.role AS role, p.level AS level, p.amount AS amount, p.currency AS currency,
       p.currency_chain_id AS currency_chain_id,
       if(p.source_type = 'code_use', 'referral_reward', c.name) AS conversion_name
FROM payouts AS p
LEFT ANY JOIN (
    SELECT project_id, timestamp, dedup_id, name FROM conversions
    WHERE (project_id, timestamp, dedup_id) IN (SELECT project_id, happened_at, source_id FROM payouts)
) AS c ON c.project_id = p.project_id AND c.timestamp = p.happened_at AND c.dedup_id = p.source_id;

DROP VIEW IF EXISTS leaderboard_attributions_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS leaderboard_attributions_mv TO leaderboard_figures AS
SELECT project_id, role AS side, recipient_identifier_type AS user_identifier_type,
       recipient_identifier AS user_identifier, toUInt64(1) AS attributions
FROM payouts WHERE source_type = 'conversion'
GROUP BY project_id, role, recipient_identifier_type, recipient_identifier, source_id;

DROP VIEW IF EXISTS token_totals_by_user_hour_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS token_totals_by_user_hour_mv TO token_totals_by_user_hour AS
SELECT project_id, role, lower(currency) AS currency, toStartOfHour(happened_at) AS hour, recipient_identifier_type,
       recipient_identifier, currency_chain_id, amount, toUInt64(1) AS payouts
FROM payouts WHERE currency != 'point';

DROP VIEW IF EXISTS token_totals_by_user_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS token_totals_by_user_mv TO token_totals_by_user AS
SELECT project_id, role, lower(currency) AS currency, recipient_identifier_type, recipient_identifier,
       currency_chain_id, amount, toUInt64(1) AS payouts
FROM payouts WHERE currency != 'point';

DROP VIEW IF EXISTS point_totals_by_user_hour_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS point_totals_by_user_hour_mv TO point_totals_by_user_hour AS
SELECT project_id, role, toStartOfHour(happened_at) AS hour, recipient_identifier_type, recipient_identifier,
       amount, toUInt64(1) AS payouts
FROM payouts WHERE currency = 'point';

DROP VIEW IF EXISTS point_totals_by_user_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS point_totals_by_user_mv TO point_totals_by_user AS
SELECT project_id, role, recipient_identifier_type, recipient_identifier, kind, amount, toUInt64(1) AS payouts
FROM payouts WHERE currency = 'point';

ALTER TABLE conversions DROP INDEX IF EXISTS conversions_dedup_id;
ALTER TABLE recipient_payouts DROP COLUMN IF EXISTS reversal;
ALTER TABLE affiliate_volumes
    DROP COLUMN IF EXISTS reversal,
    DROP COLUMN IF EXISTS volume,
    DROP COLUMN IF EXISTS revenue,
    DROP COLUMN IF EXISTS counted_volume,
    DROP COLUMN IF EXISTS counted_revenue;
ALTER TABLE payouts
    DROP COLUMN IF EXISTS reversal,
    DROP COLUMN IF EXISTS counted_volume,
    DROP COLUMN IF EXISTS counted_revenue;
DROP TABLE IF EXISTS debts;
DROP TABLE IF EXISTS conversion_reversals;
DROP TABLE IF EXISTS reversals;
