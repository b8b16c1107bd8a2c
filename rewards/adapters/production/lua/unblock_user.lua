-- KEYS: blocklist (hash), blocklist_by_time (zset); ARGV: <user>. Returns 1 if the user was on the blocklist.
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('HDEL', KEYS[1], ARGV[1])
