-- A paid payout keeps the user's cap counters it was counted in when granted ("t" all-time, "m" calendar month: see
-- rewards.domain.allotment.counted_in), so that a reversal gives back to those only (API.md §9): a payout made before
-- its cap was set was never counted, and giving it back would leave room beyond the cap. Rows written before this
-- migration read '' (nothing given back to a user's counters: the cap stays stricter, never looser).
ALTER TABLE payouts ADD COLUMN IF NOT EXISTS capped_in LowCardinality(String) DEFAULT '';

-- down
ALTER TABLE payouts DROP COLUMN IF EXISTS capped_in;
