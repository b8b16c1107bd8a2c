-- A compare-and-set of one part of a key (KEYS[1]; a renamed key's new name KEYS[2]): 0 when it is no longer as read
-- (the caller reads it again), 1 when done. ARGV[1]: the kind.
local kind = ARGV[1]
if kind == 'string' then
  -- ARGV: old value, new value
  if redis.call('GET', KEYS[1]) ~= ARGV[2] then return 0 end
  redis.call('SET', KEYS[1], ARGV[3], 'KEEPTTL')
elseif kind == 'field' then
  -- ARGV: old field, old value, new field, new value, the new field's value as read ('' none): the new value is the
  -- caller's merge of both when the new field holds one already (a counter's sum, or the pseudonym's own)
  if redis.call('HGET', KEYS[1], ARGV[2]) ~= ARGV[3] then return 0 end
  if ARGV[2] ~= ARGV[4] then
    if (redis.call('HGET', KEYS[1], ARGV[4]) or '') ~= ARGV[6] then return 0 end
    redis.call('HDEL', KEYS[1], ARGV[2])
  end
  redis.call('HSET', KEYS[1], ARGV[4], ARGV[5])
elseif kind == 'member' then
  -- ARGV: old member, new member
  local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
  if not score then return 1 end
  redis.call('ZREM', KEYS[1], ARGV[2])
  redis.call('ZADD', KEYS[1], 'NX', score, ARGV[3])
elseif kind == 'item' then
  -- ARGV: index, old item, new item
  if redis.call('LINDEX', KEYS[1], ARGV[2]) ~= ARGV[3] then return 0 end
  redis.call('LSET', KEYS[1], ARGV[2], ARGV[4])
elseif kind == 'rename' then
  -- a key named after a user: renamed; merged into the pseudonym's when it has one (sets and sorted sets: their union,
  -- keeping the longer of their times to live); a string (a debt's units) is answered, for the caller's 'sum'
  local kind_of = redis.call('TYPE', KEYS[1])['ok']
  if kind_of == 'none' then return 1 end
  if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('RENAME', KEYS[1], KEYS[2]); return 1 end
  if kind_of == 'string' then return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2])} end
  local mine, theirs = redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2])
  if kind_of == 'zset' then redis.call('ZUNIONSTORE', KEYS[2], 2, KEYS[2], KEYS[1], 'AGGREGATE', 'MAX')
  elseif kind_of == 'set' then redis.call('SUNIONSTORE', KEYS[2], KEYS[2], KEYS[1])
  else return redis.error_reply('erasure: cannot merge a ' .. kind_of) end
  if mine >= 0 and theirs >= 0 then redis.call('PEXPIRE', KEYS[2], math.max(mine, theirs)) end
  redis.call('DEL', KEYS[1])
elseif kind == 'sum' then
  -- ARGV: the renamed key's value as read, the new name's as read, their sum
  if redis.call('GET', KEYS[1]) ~= ARGV[2] or redis.call('GET', KEYS[2]) ~= ARGV[3] then return 0 end
  redis.call('SET', KEYS[2], ARGV[4], 'KEEPTTL')
  redis.call('DEL', KEYS[1])
end
return 1
