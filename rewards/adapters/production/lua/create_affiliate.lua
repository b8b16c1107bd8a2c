-- KEYS: outbox, outbox_records, affiliates; ARGV: the entry (4), user, affiliate (JSON).
-- Returns 'created', 'exists' (nothing written) or 'stale'.
--#include include/outbox.lua
if outbox_stale() then return 'stale' end
if redis.call('HSETNX', KEYS[3], ARGV[5], ARGV[6]) == 0 then return 'exists' end
outbox_add()
return 'created'
