-- KEYS: outbox, outbox_records; ARGV: the entry ids (at least one). Published: forgotten.
redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('HDEL', KEYS[2], unpack(ARGV))
return 1
