-- KEYS: requests, pending, by_user, done. ARGV: now, kept (ms), then per request: member, by_user field.
for i = 3, #ARGV, 2 do
  local stored = redis.call('HGET', KEYS[1], ARGV[i])
  if stored then
    local request = cjson.decode(stored)
    request['identifier'] = cjson.null
    request['done_ms'] = tonumber(ARGV[1])
    redis.call('HSET', KEYS[1], ARGV[i], cjson.encode(request))
  end
  redis.call('ZREM', KEYS[2], ARGV[i])
  if redis.call('HGET', KEYS[3], ARGV[i + 1]) == ARGV[i] then redis.call('HDEL', KEYS[3], ARGV[i + 1]) end
  redis.call('ZADD', KEYS[4], ARGV[1], ARGV[i])
end
local old = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]), 'LIMIT', 0, 256)
for _, member in ipairs(old) do redis.call('HDEL', KEYS[1], member); redis.call('ZREM', KEYS[4], member) end
return #old
