-- Volume and revenue figures never add two currencies (issue 28; API.md §6 `volume_currency`, the rule in
-- rewards/domain/figure_currency.py):
--   * §7's volume and revenue (args.value.amount, args.revenue.amount) count the amounts in the project's volume
--     currency and those naming none. The workers write each conversion's counted amounts beside it
--     (`counted_volume`, `counted_revenue`, under the configuration of the moment); the views read those instead of
--     the args. Conversions written before this migration count under the default, USD, which every project had:
--     the columns' DEFAULT is that rule in SQL (an amount naming no currency, or the text or `name` 'usd' in any
--     case).
--   * §4's rN_volume counts in points: a rule paying a token has its base in that token. affiliate_volumes keeps
--     each base as it was (`base`) and gains `counted_base`: the base when the rule pays points, else 0, which the
--     workers write and the §4 views read. For the rows written before, it is set to 0 where the conversion's
--     payouts were in a token (a mutation, waited for; its subquery reads another table, which a replicated table
--     allows when told).
-- The leaderboards keep the raw amounts too, for their `currency_address` filter.
--
-- Then every table built from those is emptied and rebuilt (run it while no workers write, see docs/operations.md,
-- "Migrations"; a retry after a failure starts each over; not deduplicated, so that a retry's identical blocks are
-- written). The backfills are written out where their views are not made in this file or narrow their joins to the
-- inserted block. The down section goes back to 011's views and figures.

ALTER TABLE conversions
    ADD COLUMN IF NOT EXISTS counted_volume Decimal(76, 18) DEFAULT if(multiIf(
        JSONType(args, 'value', 'currency') = 'Null', 1,
        JSONType(args, 'value', 'currency') = 'String',
        lowerUTF8(JSONExtractString(args, 'value', 'currency')) IN ('', 'usd'),
        JSONType(args, 'value', 'currency') = 'Object',
        (JSONExtractString(args, 'value', 'currency', 'name') = ''
            AND JSONExtractString(args, 'value', 'currency', 'identifier') = '')
        OR lowerUTF8(JSONExtractString(args, 'value', 'currency', 'name')) = 'usd',
        0), toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18), toDecimal256(0, 18)),
    ADD COLUMN IF NOT EXISTS counted_revenue Decimal(76, 18) DEFAULT if(multiIf(
        JSONType(args, 'revenue', 'currency') = 'Null', 1,
        JSONType(args, 'revenue', 'currency') = 'String',
        lowerUTF8(JSONExtractString(args, 'revenue', 'currency')) IN ('', 'usd'),
        JSONType(args, 'revenue', 'currency') = 'Object',
        (JSONExtractString(args, 'revenue', 'currency', 'name') = ''
            AND JSONExtractString(args, 'revenue', 'currency', 'identifier') = '')
        OR lowerUTF8(JSONExtractString(args, 'revenue', 'currency', 'name')) = 'usd',
        0), toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'amount')), 18), toDecimal256(0, 18));

ALTER TABLE leaderboard_figures
    ADD COLUMN IF NOT EXISTS counted_volume Decimal(76, 18) DEFAULT 0,
    ADD COLUMN IF NOT EXISTS counted_revenue Decimal(76, 18) DEFAULT 0;

ALTER TABLE affiliate_volumes ADD COLUMN IF NOT EXISTS counted_base Decimal(76, 18) DEFAULT base;

ALTER TABLE affiliate_volumes UPDATE counted_base = 0
WHERE (project_id, source_id) IN (
    SELECT project_id, source_id FROM payouts
    WHERE source_type = 'conversion' AND kind IN ('affiliate_commission', 'end_user_reward') AND currency != 'point'
)
SETTINGS mutations_sync = 2, allow_nondeterministic_mutations = 1;

-- The views of 008, 009 and 011 that read the args' amounts, made anew reading the counted ones.
DROP VIEW IF EXISTS leaderboard_own_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS leaderboard_own_mv TO leaderboard_figures AS
SELECT project_id, 'user' AS side, user_identifier_type, user_identifier,
       lower(JSONExtractString(args, 'value', 'currency', 'identifier')) AS value_currency,
       trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'currency', 'chain_identifier')) AS value_chain,
       lower(JSONExtractString(args, 'revenue', 'currency', 'identifier')) AS revenue_currency,
       trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'currency', 'chain_identifier')) AS revenue_chain,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18) AS volume,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'amount')), 18) AS revenue,
       counted_volume, counted_revenue
FROM conversions;

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

DROP VIEW IF EXISTS user_volume_daily_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS user_volume_daily_mv TO user_volume_daily AS
SELECT project_id, user_identifier_type, user_identifier, toDate32(timestamp) AS day, counted_volume AS volume
FROM conversions;

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

DROP VIEW IF EXISTS user_conversions_daily_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS user_conversions_daily_mv TO user_conversions_daily AS
SELECT project_id, reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)) AS user_key,
       toDate32(timestamp) AS day, name, counted_volume AS volume, counted_revenue AS revenue,
       toUInt64(1) AS conversions
FROM conversions;

-- 002's views of the §4 volumes, made anew reading the counted bases.
DROP VIEW IF EXISTS affiliate_stats_volumes_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_volumes_mv TO affiliate_stats AS
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
       if(level = 1, counted_base, 0) AS r1_volume, if(level = 2, counted_base, 0) AS r2_volume,
       if(level = 3, counted_base, 0) AS r3_volume, if(level = 4, counted_base, 0) AS r4_volume,
       toDecimal256(0, 18) AS earnings, toUInt64(0) AS referred_users
FROM affiliate_volumes;

DROP VIEW IF EXISTS affiliate_stats_daily_volumes_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_daily_volumes_mv TO affiliate_stats_daily AS
SELECT project_id, toDate32(happened_at) AS day,
       reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
       if(level = 1, counted_base, 0) AS r1_volume, if(level = 2, counted_base, 0) AS r2_volume,
       if(level = 3, counted_base, 0) AS r3_volume, if(level = 4, counted_base, 0) AS r4_volume,
       toDecimal256(0, 18) AS earnings
FROM affiliate_volumes;

DROP VIEW IF EXISTS affiliate_stats_daily_by_user_volumes_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_daily_by_user_volumes_mv TO affiliate_stats_daily_by_user AS
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
       toDate32(happened_at) AS day, if(level = 1, counted_base, 0) AS r1_volume,
       if(level = 2, counted_base, 0) AS r2_volume, if(level = 3, counted_base, 0) AS r3_volume,
       if(level = 4, counted_base, 0) AS r4_volume, toDecimal256(0, 18) AS earnings
FROM affiliate_volumes;

DROP VIEW IF EXISTS affiliate_listing_volumes_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_listing_volumes_mv TO affiliate_listing AS
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
       if(level = 1, counted_base, 0) AS r1_volume, if(level = 2, counted_base, 0) AS r2_volume,
       if(level = 3, counted_base, 0) AS r3_volume, if(level = 4, counted_base, 0) AS r4_volume,
       counted_base AS total_volume
FROM affiliate_volumes;

-- The leaderboards' figures (as 008's backfill, with the counted amounts).
TRUNCATE TABLE leaderboard_figures;

INSERT INTO leaderboard_figures (project_id, side, user_identifier_type, user_identifier, value_currency, value_chain,
                                 revenue_currency, revenue_chain, volume, revenue, counted_volume, counted_revenue)
SETTINGS insert_deduplicate = 0
SELECT project_id, 'user', user_identifier_type, user_identifier,
       lower(JSONExtractString(args, 'value', 'currency', 'identifier')),
       trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'currency', 'chain_identifier')),
       lower(JSONExtractString(args, 'revenue', 'currency', 'identifier')),
       trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'currency', 'chain_identifier')),
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18),
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'amount')), 18),
       counted_volume, counted_revenue
FROM conversions;

INSERT INTO leaderboard_figures (project_id, side, user_identifier_type, user_identifier, level, value_currency,
                                 value_chain, revenue_currency, revenue_chain, volume, revenue, counted_volume,
                                 counted_revenue)
SETTINGS insert_deduplicate = 0
SELECT c.project_id, 'affiliate', v.affiliate_identifier_type, v.affiliate_identifier, v.level,
       lower(JSONExtractString(c.args, 'value', 'currency', 'identifier')),
       trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'currency', 'chain_identifier')),
       lower(JSONExtractString(c.args, 'revenue', 'currency', 'identifier')),
       trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'currency', 'chain_identifier')),
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'value', 'amount')), 18),
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(c.args, 'revenue', 'amount')), 18),
       c.counted_volume, c.counted_revenue
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

TRUNCATE TABLE user_volume_daily;

-- backfill: user_volume_daily_mv

-- By referrer (as 009's backfill, with the counted volume).
TRUNCATE TABLE referrer_earnings_daily;

INSERT INTO referrer_earnings_daily SETTINGS insert_deduplicate = 0
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
) AS c ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id
LEFT ANY JOIN (
    SELECT project_id, source_id, happened_at, level, recipient_identifier_type, recipient_identifier, amount,
           currency, currency_chain_id
    FROM payouts WHERE kind = 'affiliate_commission'
) AS p ON p.project_id = v.project_id AND p.source_id = v.source_id AND p.happened_at = v.happened_at
    AND p.level = v.level AND p.recipient_identifier_type = v.affiliate_identifier_type
    AND p.recipient_identifier = v.affiliate_identifier;

-- The affiliate portal (as 011's backfill): affiliate_portal_totals emptied first, its level-1 figures coming back
-- through its view of the rows inserted into affiliate_portal_daily, the rest from their sources.
TRUNCATE TABLE affiliate_portal_totals;

TRUNCATE TABLE affiliate_portal_daily;

INSERT INTO affiliate_portal_daily SETTINGS insert_deduplicate = 0
SELECT v.project_id AS project_id,
       reinterpretAsUInt128(sipHash128(v.affiliate_identifier_type, v.affiliate_identifier)) AS user_key,
       toDate32(v.happened_at) AS day, v.level AS level,
       reinterpretAsUInt128(sipHash128(c.user_identifier_type, c.user_identifier)) AS trader_key, c.name AS name,
       c.counted_volume AS volume, c.counted_revenue AS revenue, toUInt64(1) AS attributions
FROM affiliate_volumes AS v
INNER JOIN (
    SELECT project_id, dedup_id, timestamp, name, user_identifier_type, user_identifier, counted_volume,
           counted_revenue
    FROM conversions LIMIT 1 BY project_id, timestamp, dedup_id
) AS c ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id;

TRUNCATE TABLE affiliate_portal_earnings_daily;

INSERT INTO affiliate_portal_earnings_daily SETTINGS insert_deduplicate = 0
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
    LIMIT 1 BY project_id, timestamp, dedup_id
) AS c ON c.project_id = p.project_id AND c.timestamp = p.happened_at AND c.dedup_id = p.source_id
WHERE p.role = 'affiliate';

INSERT INTO affiliate_portal_totals (project_id, user_key, status, region, audience) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)), status, region, audience
FROM affiliates;

INSERT INTO affiliate_portal_totals (project_id, user_key, referred_users) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)), toUInt64(1)
FROM referrals;

INSERT INTO affiliate_portal_totals (project_id, user_key, removed_users) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)), toUInt64(1)
FROM referral_removals;

INSERT INTO affiliate_portal_totals (project_id, user_key, earnings) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)),
       map(if(currency = 'point', 'point', concat(toString(currency_decimals), ':', currency_name)), amount)
FROM payouts WHERE role = 'affiliate';

TRUNCATE TABLE user_conversions_daily;

-- backfill: user_conversions_daily_mv

-- The §4 figures (the views of 002 and 007), from the counted bases.
TRUNCATE TABLE affiliate_stats;

INSERT INTO affiliate_stats (project_id, user_key, r1_volume, r2_volume, r3_volume, r4_volume)
SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)),
       if(level = 1, counted_base, 0), if(level = 2, counted_base, 0), if(level = 3, counted_base, 0),
       if(level = 4, counted_base, 0)
FROM affiliate_volumes;

INSERT INTO affiliate_stats (project_id, user_key, earnings) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)), amount
FROM payouts WHERE currency = 'point' AND role = 'affiliate';

INSERT INTO affiliate_stats (project_id, user_key, referred_users) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)), toUInt64(1)
FROM referrals;

INSERT INTO affiliate_stats (project_id, user_key, removed_users) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)), toUInt64(1)
FROM referral_removals;

TRUNCATE TABLE affiliate_stats_daily;

INSERT INTO affiliate_stats_daily (project_id, day, user_key, r1_volume, r2_volume, r3_volume, r4_volume)
SETTINGS insert_deduplicate = 0
SELECT project_id, toDate32(happened_at),
       reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)),
       if(level = 1, counted_base, 0), if(level = 2, counted_base, 0), if(level = 3, counted_base, 0),
       if(level = 4, counted_base, 0)
FROM affiliate_volumes;

INSERT INTO affiliate_stats_daily (project_id, day, user_key, earnings) SETTINGS insert_deduplicate = 0
SELECT project_id, toDate32(happened_at), reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)),
       amount
FROM payouts WHERE currency = 'point' AND role = 'affiliate';

TRUNCATE TABLE affiliate_stats_daily_by_user;

INSERT INTO affiliate_stats_daily_by_user (project_id, user_key, day, r1_volume, r2_volume, r3_volume, r4_volume)
SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)),
       toDate32(happened_at), if(level = 1, counted_base, 0), if(level = 2, counted_base, 0),
       if(level = 3, counted_base, 0), if(level = 4, counted_base, 0)
FROM affiliate_volumes;

INSERT INTO affiliate_stats_daily_by_user (project_id, user_key, day, earnings) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)),
       toDate32(happened_at), amount
FROM payouts WHERE currency = 'point' AND role = 'affiliate';

TRUNCATE TABLE affiliate_listing;

INSERT INTO affiliate_listing (project_id, user_key, user_identifier_type, user_identifier, name, status, region,
                               audience, tax_status, tier, created_at)
SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)), user_identifier_type,
       user_identifier, name, status, region, audience, tax_status, tier, created_at
FROM affiliates;

INSERT INTO affiliate_listing (project_id, user_key, r1_volume, r2_volume, r3_volume, r4_volume, total_volume)
SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)),
       if(level = 1, counted_base, 0), if(level = 2, counted_base, 0), if(level = 3, counted_base, 0),
       if(level = 4, counted_base, 0), counted_base
FROM affiliate_volumes;

INSERT INTO affiliate_listing (project_id, user_key, earnings) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)), amount
FROM payouts WHERE currency = 'point' AND role = 'affiliate';

INSERT INTO affiliate_listing (project_id, user_key, referred_users) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)), toUInt64(1)
FROM referrals;

INSERT INTO affiliate_listing (project_id, user_key, removed_users) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)), toUInt64(1)
FROM referral_removals;

-- down
-- Back to 011: the views as 002, 008, 009 and 011 made them, every table rebuilt from the args and the bases as
-- those migrations' backfills did, then the counted columns dropped.

DROP VIEW IF EXISTS leaderboard_own_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS leaderboard_own_mv TO leaderboard_figures AS
SELECT project_id, 'user' AS side, user_identifier_type, user_identifier,
       lower(JSONExtractString(args, 'value', 'currency', 'identifier')) AS value_currency,
       trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'currency', 'chain_identifier')) AS value_chain,
       lower(JSONExtractString(args, 'revenue', 'currency', 'identifier')) AS revenue_currency,
       trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'currency', 'chain_identifier')) AS revenue_chain,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18) AS volume,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'amount')), 18) AS revenue
FROM conversions;

DROP VIEW IF EXISTS leaderboard_referred_mv;

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

DROP VIEW IF EXISTS user_volume_daily_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS user_volume_daily_mv TO user_volume_daily AS
SELECT project_id, user_identifier_type, user_identifier, toDate32(timestamp) AS day,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18) AS volume
FROM conversions;

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
    SELECT project_id, timestamp, dedup_id, user_identifier_type, user_identifier,
           toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18) AS volume
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

DROP VIEW IF EXISTS affiliate_portal_daily_mv;

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

DROP VIEW IF EXISTS affiliate_portal_earnings_daily_mv;

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

DROP VIEW IF EXISTS user_conversions_daily_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS user_conversions_daily_mv TO user_conversions_daily AS
SELECT project_id, reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)) AS user_key,
       toDate32(timestamp) AS day, name,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18) AS volume,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'revenue', 'amount')), 18) AS revenue,
       toUInt64(1) AS conversions
FROM conversions;

DROP VIEW IF EXISTS affiliate_stats_volumes_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_volumes_mv TO affiliate_stats AS
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
       if(level = 1, base, 0) AS r1_volume, if(level = 2, base, 0) AS r2_volume,
       if(level = 3, base, 0) AS r3_volume, if(level = 4, base, 0) AS r4_volume,
       toDecimal256(0, 18) AS earnings, toUInt64(0) AS referred_users
FROM affiliate_volumes;

DROP VIEW IF EXISTS affiliate_stats_daily_volumes_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_daily_volumes_mv TO affiliate_stats_daily AS
SELECT project_id, toDate32(happened_at) AS day, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
       if(level = 1, base, 0) AS r1_volume, if(level = 2, base, 0) AS r2_volume,
       if(level = 3, base, 0) AS r3_volume, if(level = 4, base, 0) AS r4_volume,
       toDecimal256(0, 18) AS earnings
FROM affiliate_volumes;

DROP VIEW IF EXISTS affiliate_stats_daily_by_user_volumes_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_stats_daily_by_user_volumes_mv TO affiliate_stats_daily_by_user AS
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
       toDate32(happened_at) AS day, if(level = 1, base, 0) AS r1_volume, if(level = 2, base, 0) AS r2_volume,
       if(level = 3, base, 0) AS r3_volume, if(level = 4, base, 0) AS r4_volume, toDecimal256(0, 18) AS earnings
FROM affiliate_volumes;

DROP VIEW IF EXISTS affiliate_listing_volumes_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS affiliate_listing_volumes_mv TO affiliate_listing AS
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)) AS user_key,
       if(level = 1, base, 0) AS r1_volume, if(level = 2, base, 0) AS r2_volume,
       if(level = 3, base, 0) AS r3_volume, if(level = 4, base, 0) AS r4_volume, base AS total_volume
FROM affiliate_volumes;

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

TRUNCATE TABLE user_volume_daily;

-- backfill: user_volume_daily_mv

TRUNCATE TABLE referrer_earnings_daily;

INSERT INTO referrer_earnings_daily SETTINGS insert_deduplicate = 0
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
    SELECT project_id, timestamp, dedup_id, user_identifier_type, user_identifier,
           toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18) AS volume
    FROM conversions
) AS c ON c.project_id = v.project_id AND c.timestamp = v.happened_at AND c.dedup_id = v.source_id
LEFT ANY JOIN (
    SELECT project_id, source_id, happened_at, level, recipient_identifier_type, recipient_identifier, amount,
           currency, currency_chain_id
    FROM payouts WHERE kind = 'affiliate_commission'
) AS p ON p.project_id = v.project_id AND p.source_id = v.source_id AND p.happened_at = v.happened_at
    AND p.level = v.level AND p.recipient_identifier_type = v.affiliate_identifier_type
    AND p.recipient_identifier = v.affiliate_identifier;

TRUNCATE TABLE affiliate_portal_totals;

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

INSERT INTO affiliate_portal_totals (project_id, user_key, status, region, audience) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)), status, region, audience
FROM affiliates;

INSERT INTO affiliate_portal_totals (project_id, user_key, referred_users) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)), toUInt64(1)
FROM referrals;

INSERT INTO affiliate_portal_totals (project_id, user_key, removed_users) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)), toUInt64(1)
FROM referral_removals;

INSERT INTO affiliate_portal_totals (project_id, user_key, earnings) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)),
       map(if(currency = 'point', 'point', concat(toString(currency_decimals), ':', currency_name)), amount)
FROM payouts WHERE role = 'affiliate';

TRUNCATE TABLE user_conversions_daily;

-- backfill: user_conversions_daily_mv

TRUNCATE TABLE affiliate_stats;

INSERT INTO affiliate_stats (project_id, user_key, r1_volume, r2_volume, r3_volume, r4_volume)
SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)),
       if(level = 1, base, 0), if(level = 2, base, 0), if(level = 3, base, 0),
       if(level = 4, base, 0)
FROM affiliate_volumes;

INSERT INTO affiliate_stats (project_id, user_key, earnings) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)), amount
FROM payouts WHERE currency = 'point' AND role = 'affiliate';

INSERT INTO affiliate_stats (project_id, user_key, referred_users) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)), toUInt64(1)
FROM referrals;

INSERT INTO affiliate_stats (project_id, user_key, removed_users) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)), toUInt64(1)
FROM referral_removals;

TRUNCATE TABLE affiliate_stats_daily;

INSERT INTO affiliate_stats_daily (project_id, day, user_key, r1_volume, r2_volume, r3_volume, r4_volume)
SETTINGS insert_deduplicate = 0
SELECT project_id, toDate32(happened_at),
       reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)),
       if(level = 1, base, 0), if(level = 2, base, 0), if(level = 3, base, 0),
       if(level = 4, base, 0)
FROM affiliate_volumes;

INSERT INTO affiliate_stats_daily (project_id, day, user_key, earnings) SETTINGS insert_deduplicate = 0
SELECT project_id, toDate32(happened_at), reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)),
       amount
FROM payouts WHERE currency = 'point' AND role = 'affiliate';

TRUNCATE TABLE affiliate_stats_daily_by_user;

INSERT INTO affiliate_stats_daily_by_user (project_id, user_key, day, r1_volume, r2_volume, r3_volume, r4_volume)
SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)),
       toDate32(happened_at), if(level = 1, base, 0), if(level = 2, base, 0),
       if(level = 3, base, 0), if(level = 4, base, 0)
FROM affiliate_volumes;

INSERT INTO affiliate_stats_daily_by_user (project_id, user_key, day, earnings) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)),
       toDate32(happened_at), amount
FROM payouts WHERE currency = 'point' AND role = 'affiliate';

TRUNCATE TABLE affiliate_listing;

INSERT INTO affiliate_listing (project_id, user_key, user_identifier_type, user_identifier, name, status, region,
                               audience, tax_status, tier, created_at)
SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(user_identifier_type, user_identifier)), user_identifier_type,
       user_identifier, name, status, region, audience, tax_status, tier, created_at
FROM affiliates;

INSERT INTO affiliate_listing (project_id, user_key, r1_volume, r2_volume, r3_volume, r4_volume, total_volume)
SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(affiliate_identifier_type, affiliate_identifier)),
       if(level = 1, base, 0), if(level = 2, base, 0), if(level = 3, base, 0),
       if(level = 4, base, 0), base
FROM affiliate_volumes;

INSERT INTO affiliate_listing (project_id, user_key, earnings) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(recipient_identifier_type, recipient_identifier)), amount
FROM payouts WHERE currency = 'point' AND role = 'affiliate';

INSERT INTO affiliate_listing (project_id, user_key, referred_users) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)), toUInt64(1)
FROM referrals;

INSERT INTO affiliate_listing (project_id, user_key, removed_users) SETTINGS insert_deduplicate = 0
SELECT project_id, reinterpretAsUInt128(sipHash128(referrer_identifier_type, referrer_identifier)), toUInt64(1)
FROM referral_removals;

ALTER TABLE affiliate_volumes DROP COLUMN IF EXISTS counted_base;

ALTER TABLE leaderboard_figures DROP COLUMN IF EXISTS counted_volume, DROP COLUMN IF EXISTS counted_revenue;

ALTER TABLE conversions DROP COLUMN IF EXISTS counted_volume, DROP COLUMN IF EXISTS counted_revenue;
