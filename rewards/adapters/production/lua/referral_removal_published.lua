-- KEYS: outbox, outbox_records, referral_removals; ARGV: entry id, user. A removal published by its request: its entry
-- goes, and so does its mark, if still the user's.
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('HGET', KEYS[3], ARGV[2]) == ARGV[1] then redis.call('HDEL', KEYS[3], ARGV[2]) end
return 1
