-- A user's payouts (API.md §7, the published client's G6 methods): read by recipient, never by scanning the project's
-- payouts (`payouts` is ordered by time).
--
-- The views below join what the workers wrote just before in the same delivery (they insert conversions, then
-- payouts, then affiliate_volumes: stream_workers.processor.TABLES). Inside a materialized view's query, the name of
-- the view's source table reads the block being inserted, also in a subquery; so each join reads only the rows of
-- the block's own conversions and payouts, found by the sorting keys of those tables (a conversion's payouts and
-- volumes happen at the conversion's timestamp).

-- Every payout, by recipient and time: GET /payouts (grouped by conversion) and /payouts/movements (newest first) read
-- only the user's rows. `conversion_name` is the name of the event that paid it; 'referral_reward' for a code use's
-- referral rewards ('' for a conversion whose row the view could not find).
CREATE TABLE IF NOT EXISTS recipient_payouts
(
    project_id String,
    recipient_identifier_type LowCardinality(String),
    recipient_identifier String,
    happened_at DateTime64(3, 'UTC'),
    payout_id String,
    kind LowCardinality(String),
    role LowCardinality(String),
    level UInt8,
    amount Decimal(76, 18),
    currency String,
    currency_chain_id Int64,
    conversion_name String
)
ENGINE = MergeTree
ORDER BY (project_id, recipient_identifier_type, recipient_identifier, happened_at, payout_id)
SETTINGS non_replicated_deduplication_window = 100000, index_granularity = 1024;

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

-- Each user's volume per day (UTC): the sum of args.value.amount of its conversion events (API.md §7), a bare JSON
-- number or a decimal string.
CREATE TABLE IF NOT EXISTS user_volume_daily
(
    project_id String,
    user_identifier_type LowCardinality(String),
    user_identifier String,
    day Date32,
    volume Decimal(76, 18)
)
ENGINE = SummingMergeTree
ORDER BY (project_id, user_identifier_type, user_identifier, day)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS user_volume_daily_mv TO user_volume_daily AS
SELECT project_id, user_identifier_type, user_identifier, toDate32(timestamp) AS day,
       toDecimal256OrZero(trim(BOTH '"' FROM JSONExtractRaw(args, 'value', 'amount')), 18) AS volume
FROM conversions;

-- Per referrer and each user it referred directly (its level 1 at the time of the conversion), per day (UTC) and
-- commission currency: GET /payouts/by-referrer. A conversion at depth N below the referrer counts for the user
-- between them (the converting user at N = 1, else the affiliate at level N - 1 of the conversion's chain):
-- its volume (args.value.amount) as direct (N = 1) or indirect (2-4) eligible volume, and the referrer's commission
-- at that level (the referrer's share, a rebate taken off). Volumes sit under the commission's currency ('' when no
-- commission was paid): a reader sums them over the currencies.
CREATE TABLE IF NOT EXISTS referrer_earnings_daily
(
    project_id String,
    referrer_identifier_type LowCardinality(String),
    referrer_identifier String,
    referred_identifier_type LowCardinality(String),
    referred_identifier String,
    day Date32,
    currency String,
    currency_chain_id Int64,
    direct_volume Decimal(76, 18),
    indirect_volume Decimal(76, 18),
    direct_commission Decimal(76, 18),
    commission Decimal(76, 18)
)
ENGINE = SummingMergeTree
ORDER BY (project_id, referrer_identifier_type, referrer_identifier, referred_identifier_type, referred_identifier,
          day, currency, currency_chain_id)
SETTINGS non_replicated_deduplication_window = 100000;

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

-- The backfills of what was written before (run them while no workers write, see docs/operations.md,
-- "Migrations"): each table emptied first, so that a retry after a failure starts it over; not deduplicated, so that
-- a retry's identical block is written.
-- recipient_payouts and referrer_earnings_daily are written out, not `-- backfill:` (schemas/clickhouse/__init__.py):
-- their views narrow the conversions and payouts they join to the keys of the inserted block, which these
-- queries over whole tables leave out.
TRUNCATE TABLE recipient_payouts;

INSERT INTO recipient_payouts SETTINGS insert_deduplicate = 0
SELECT p.project_id AS project_id, p.recipient_identifier_type AS recipient_identifier_type,
       p.recipient_identifier AS recipient_identifier, p.happened_at AS happened_at, p.payout_id AS payout_id,
       p.kind AS kind, p.role AS role, p.level AS level, p.amount AS amount, p.currency AS currency,
       p.currency_chain_id AS currency_chain_id,
       if(p.source_type = 'code_use', 'referral_reward', c.name) AS conversion_name
FROM payouts AS p
LEFT ANY JOIN (SELECT project_id, timestamp, dedup_id, name FROM conversions) AS c
    ON c.project_id = p.project_id AND c.timestamp = p.happened_at AND c.dedup_id = p.source_id;

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

-- down
DROP VIEW IF EXISTS referrer_earnings_daily_mv;
DROP TABLE IF EXISTS referrer_earnings_daily;
DROP VIEW IF EXISTS user_volume_daily_mv;
DROP TABLE IF EXISTS user_volume_daily;
DROP VIEW IF EXISTS recipient_payouts_mv;
DROP TABLE IF EXISTS recipient_payouts;
