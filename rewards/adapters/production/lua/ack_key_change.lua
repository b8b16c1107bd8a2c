-- KEYS: the acknowledgements of one key change (list); ARGV: their TTL (ms). A process applied the change.
redis.call('RPUSH', KEYS[1], 1)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
