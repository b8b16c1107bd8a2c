-- Claim check expiry (API.md §8): a check closed under a project's `claim_check_expiry` carries the time it expires
-- (null: never), which its signed form names as its EIP-712 `deadline`; once past it, unclaimed, the check is
-- `expired` (a new version of it, written like every change). Older checks have none: they never expire.
ALTER TABLE claim_checks ADD COLUMN IF NOT EXISTS expires_at Nullable(DateTime64(3, 'UTC'));

-- down
ALTER TABLE claim_checks DROP COLUMN IF EXISTS expires_at;
