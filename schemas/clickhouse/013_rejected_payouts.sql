-- Rejected payouts (API.md §8): a payout the rules refuse (blocklist, self-referral, caps, budgets, an operator) is
-- not paid and counts in no figure: it is written to `rejected_payouts`, never to `payouts`, so no view of payouts
-- sees it. Movements (GET /payouts/movements) show it: its row in `recipient_payouts` carries its reason in
-- `rejection` ('' for a paid payout), which every other reader of that table leaves out.
CREATE TABLE IF NOT EXISTS rejected_payouts
(
    project_id String,
    payout_id String,
    source_id String,
    source_type LowCardinality(String),
    kind LowCardinality(String),
    role LowCardinality(String),
    level UInt8,
    recipient_identifier String,
    recipient_identifier_type LowCardinality(String),
    amount Decimal(76, 18),
    currency String,
    currency_chain_id Int64,
    currency_name String,
    currency_decimals UInt8,
    happened_at DateTime64(3, 'UTC'),
    created_at DateTime64(3, 'UTC'),
    code String,
    reason LowCardinality(String)
)
ENGINE = MergeTree
ORDER BY (project_id, happened_at, payout_id)
SETTINGS non_replicated_deduplication_window = 100000;

ALTER TABLE recipient_payouts ADD COLUMN IF NOT EXISTS rejection LowCardinality(String) DEFAULT '';

-- As recipient_payouts_mv (009) reads payouts: a delivery inserts its conversions, then its payouts, then its rejected
-- payouts (stream_workers.processor.TABLES); the join reads the block's own conversions by their sorting key.
CREATE MATERIALIZED VIEW IF NOT EXISTS recipient_rejected_payouts_mv TO recipient_payouts AS
SELECT p.project_id AS project_id, p.recipient_identifier_type AS recipient_identifier_type,
       p.recipient_identifier AS recipient_identifier, p.happened_at AS happened_at, p.payout_id AS payout_id,
       p.kind AS kind, p.role AS role, p.level AS level, p.amount AS amount, p.currency AS currency,
       p.currency_chain_id AS currency_chain_id,
       if(p.source_type = 'code_use', 'referral_reward', c.name) AS conversion_name, p.reason AS rejection
FROM rejected_payouts AS p
LEFT ANY JOIN (
    SELECT project_id, timestamp, dedup_id, name FROM conversions
    WHERE (project_id, timestamp, dedup_id) IN (SELECT project_id, happened_at, source_id FROM rejected_payouts)
) AS c ON c.project_id = p.project_id AND c.timestamp = p.happened_at AND c.dedup_id = p.source_id;

-- down
DROP VIEW IF EXISTS recipient_rejected_payouts_mv;
ALTER TABLE recipient_payouts DELETE WHERE rejection != '' SETTINGS mutations_sync = 2;
ALTER TABLE recipient_payouts DROP COLUMN IF EXISTS rejection;
DROP TABLE IF EXISTS rejected_payouts;
