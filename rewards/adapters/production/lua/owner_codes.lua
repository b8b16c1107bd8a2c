-- KEYS: owner_codes; ARGV: the first and last rank of the page (newest first). Returns {the owner's count of
-- codes, the codes of the page}.
return {redis.call('ZCARD', KEYS[1]), redis.call('ZREVRANGE', KEYS[1], ARGV[1], ARGV[2])}
