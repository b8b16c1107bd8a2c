-- KEYS: the global index of webhook endpoints (its own slot): those with deliveries pending (zset: member → earliest
-- due), those holding any (hash: member → "<version>:<pending>"). ARGV: per endpoint, its member ("<project id><US>
-- <endpoint id>"), the version of its project its state was read at, then that state: its earliest due ('' when none
-- is pending), how many are pending, how many it holds.
-- Applies each state newer than the one applied: a script's answer may arrive after a later one's (two processes
-- leasing and enqueueing at once), and must not put an older due time back. An endpoint holding nothing leaves both.
for i = 1, #ARGV, 5 do
  local member = ARGV[i]
  local applied = redis.call('HGET', KEYS[2], member)
  if not applied or tonumber(string.match(applied, '^(%d+):')) < tonumber(ARGV[i + 1]) then
    if tonumber(ARGV[i + 4]) == 0 then
      redis.call('HDEL', KEYS[2], member)
    else
      redis.call('HSET', KEYS[2], member, ARGV[i + 1] .. ':' .. ARGV[i + 3])
    end
    if ARGV[i + 2] == '' then
      redis.call('ZREM', KEYS[1], member)
    else
      redis.call('ZADD', KEYS[1], ARGV[i + 2], member)
    end
  end
end
return 1
