-- KEYS: outbox, outbox_records, then each event's reversals key; ARGV: entry id, due, then per event the text the
-- change wrote and the text before it ('' none). Puts the texts back, if the entry is still the request's own (no
-- later reversal built on it).
--#include include/outbox.lua
if not outbox_own() then return 0 end
for i = 3, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[2 * i - 3] then
    if ARGV[2 * i - 2] == '' then
      redis.call('DEL', KEYS[i])
    else
      redis.call('SET', KEYS[i], ARGV[2 * i - 2], 'KEEPTTL')
    end
  end
end
outbox_remove()
return 1
