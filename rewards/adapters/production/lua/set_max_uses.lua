-- KEYS: code, code_uses; ARGV: max_uses ('' for none), how many of the latest uses to read. Python checked the
-- new limit against the uses; this re-checks it: 'changed' (nothing written) if the code is gone or has more
-- uses than the limit by now (0, which disables the code, is never below them). Returns {'set', the code's fields
-- (flat), its latest uses} or {'changed'}.
local uses = redis.call('HGET', KEYS[1], 'current_uses')
if not uses or (ARGV[1] ~= '' and ARGV[1] ~= '0' and tonumber(uses) > tonumber(ARGV[1])) then return {'changed'} end
if ARGV[1] == '' then redis.call('HDEL', KEYS[1], 'max_uses') else redis.call('HSET', KEYS[1], 'max_uses', ARGV[1]) end
return {'set', redis.call('HGETALL', KEYS[1]), redis.call('LRANGE', KEYS[2], -tonumber(ARGV[2]), -1)}
