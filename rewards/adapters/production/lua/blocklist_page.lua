-- KEYS: blocklist (hash), blocklist_by_time (zset); ARGV: offset, limit. One consistent read of a page, the latest
-- blocked first (ties by <user>, descending as ZREVRANGE orders them): {total, user, score, reason, user, ...}.
local total = redis.call('ZCARD', KEYS[2])
local page = redis.call('ZREVRANGE', KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[1]) + tonumber(ARGV[2]) - 1, 'WITHSCORES')
local result = {total}
for i = 1, #page, 2 do
  result[#result + 1] = page[i]
  result[#result + 1] = page[i + 1]
  result[#result + 1] = redis.call('HGET', KEYS[1], page[i]) or 'null'
end
return result
