-- Tracking events of the published client (API.md §7: `POST /events` without a dedup_id): pageviews, connect_wallet,
-- and other names that do not pay. Written by the stream workers like every other record, one insert per delivery
-- under the delivery's token. `code` is the referral code the event counts for ('' none): the code a pageview
-- names (a click), the code whose use a connect_wallet made (an attribution, the referral itself being in
-- `referrals` like any code use's).
CREATE TABLE IF NOT EXISTS tracking_events
(
    project_id String,
    id String,
    name String,
    tracking_id String,
    user_identifier String,
    user_identifier_type LowCardinality(String),
    code String,
    received_at DateTime64(3, 'UTC'),
    args String,
    metadata String,
    signature Nullable(String),
    signature_message Nullable(String),
    signature_public_key Nullable(String),
    account_chain_id Nullable(Int64)
)
ENGINE = MergeTree
ORDER BY (project_id, received_at, id)
SETTINGS non_replicated_deduplication_window = 100000;

-- Clicks and attributions per code, all time: a code's figures are one row (summed: rows may not be merged yet).
CREATE TABLE IF NOT EXISTS code_traffic
(
    project_id String,
    code String,
    clicks UInt64,
    attributions UInt64
)
ENGINE = SummingMergeTree
ORDER BY (project_id, code)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS code_traffic_mv TO code_traffic AS
SELECT project_id, code, toUInt64(name = 'pageview') AS clicks, toUInt64(name = 'connect_wallet') AS attributions
FROM tracking_events WHERE code != '';

-- The same per code and day (UTC, by the time received): a window reads only its days of the code.
CREATE TABLE IF NOT EXISTS code_traffic_daily
(
    project_id String,
    code String,
    day Date32,
    clicks UInt64,
    attributions UInt64
)
ENGINE = SummingMergeTree
ORDER BY (project_id, code, day)
SETTINGS non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS code_traffic_daily_mv TO code_traffic_daily AS
SELECT project_id, code, toDate32(received_at) AS day, toUInt64(name = 'pageview') AS clicks,
       toUInt64(name = 'connect_wallet') AS attributions
FROM tracking_events WHERE code != '';

-- down
DROP VIEW IF EXISTS code_traffic_daily_mv;
DROP TABLE IF EXISTS code_traffic_daily;
DROP VIEW IF EXISTS code_traffic_mv;
DROP TABLE IF EXISTS code_traffic;
DROP TABLE IF EXISTS tracking_events;
