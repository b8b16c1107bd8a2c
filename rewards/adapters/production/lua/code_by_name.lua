-- KEYS: code_names, the code hash of the current name Python found for a name, and optionally referrals; ARGV: the
-- name, that current name, a user. A snapshot of the code the name finds (a rename moves a code's hash to its new
-- name): {'code', its fields (flat; none if no code has the name), the user's referral edge ('' none)}, or {'moved',
-- the name's current name} when it is not the one given (nothing read: Python reads again there).
local current = redis.call('HGET', KEYS[1], ARGV[1]) or ARGV[1]
if current ~= ARGV[2] then return {'moved', current} end
local edge = KEYS[3] and redis.call('HGET', KEYS[3], ARGV[3]) or ''
return {'code', redis.call('HGETALL', KEYS[2]), edge}
