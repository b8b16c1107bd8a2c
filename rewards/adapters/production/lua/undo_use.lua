-- KEYS: outbox, outbox_records, code_names, code, code_uses, referrals (code and code_uses: of the current name Python
-- found for the name the use was made under); ARGV: entry id, due, the use (JSON), user, use id, the name used under,
-- that current name. {'moved', the current name} when the code was renamed since Python looked (nothing written:
-- Python undoes again under that name).
--#include include/outbox.lua
if not outbox_own() then return 0 end
local current = redis.call('HGET', KEYS[3], ARGV[6]) or ARGV[6]
if current ~= ARGV[7] then return {'moved', current} end
if redis.call('LREM', KEYS[5], -1, ARGV[3]) == 1 then redis.call('HINCRBY', KEYS[4], 'current_uses', -1) end
local edge = redis.call('HGET', KEYS[6], ARGV[4])
if edge and cjson.decode(edge).use == ARGV[5] then redis.call('HDEL', KEYS[6], ARGV[4]) end
outbox_remove()
return 1
