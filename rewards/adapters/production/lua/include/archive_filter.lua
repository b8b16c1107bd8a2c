-- The project's archive filter (rewards.adapters.production.redis_state.archive_filter): a Bloom filter of the event
-- ids the workers wrote to `dedup_ids`, in generations of one dedup window each (the current one and the one
-- before), each a chain of sub-filters <filter>:<generation>:<n> of 2^(20+n) bits and 10+n hash positions (each
-- one's false-positive rate at capacity half the one before: the chain stays under 2^-9). An id comes as two
-- 32-bit hashes (h2 odd), its positions h1 + j*h2 + (j^3-j)/6 modulo the sub-filter's bits (enhanced double
-- hashing: exact in Lua's doubles). The filter hash: run (the Redis run_id whose writes it holds all of), last (that
-- instance's last add, ms), cover (since when every written id went in, ms), g, g_start, g_subs, g_n (the current
-- generation: number, start, sub-filters, ids in its last one), p_subs (the previous generation's sub-filters).
local AF_BASE_BITS, AF_BASE_K, AF_LAST_SUB = 20, 10, 10  -- the last sub-filter (2^30 bits) takes every id past it

local function af_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function af_run_id()
  return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
end

local function af_capacity(sub)  -- ids at which the sub-filter's false-positive rate reaches 2^-k: m ln 2 / k
  return math.floor(2 ^ (AF_BASE_BITS + sub) * 0.6931 / (AF_BASE_K + sub))
end

local AF_GROUP = 64  -- ids per BITFIELD call (64 ids x 20 positions x 4 arguments stays under Lua's unpack limit)

-- Set the bits of the ids whose hashes are argv[first..last] (h1, h2 pairs) in one BITFIELD call; returns how many
-- of them were new (some bit of theirs was 0). One call for a group rather than one per id: Redis's Lua spent ~15 µs
-- an id on the calls (INFO commandstats, bench/hot_project.py).
local function af_set_group(key, sub, argv, first, last)
  local bits, k, ops, at = 2 ^ (AF_BASE_BITS + sub), AF_BASE_K + sub, {}, 0
  for i = first, last, 2 do
    local h1, h2 = tonumber(argv[i]), tonumber(argv[i + 1])
    for j = 0, k - 1 do
      ops[at + 1], ops[at + 2], ops[at + 3], ops[at + 4] = 'SET', 'u1', (h1 + j * h2 + (j * j * j - j) / 6) % bits, 1
      at = at + 4
    end
  end
  local old, new = redis.call('BITFIELD', key, unpack(ops)), 0
  for id = 0, (last - first) / 2 do
    for j = id * k + 1, id * k + k do
      if old[j] == 0 then new = new + 1; break end  -- (one already in it counts once)
    end
  end
  return new
end

local function af_in(key, sub, h1, h2)  -- GETBIT by GETBIT: a new id stops at its first 0 (two reads on average)
  local bits = 2 ^ (AF_BASE_BITS + sub)
  for j = 0, AF_BASE_K + sub - 1 do
    if redis.call('GETBIT', key, (h1 + j * h2 + (j * j * j - j) / 6) % bits) == 0 then return false end
  end
  return true
end

local function af_has(filter, gen, subs, h1, h2)  -- a "maybe" of any sub-filter of the generation
  for sub = subs - 1, 0, -1 do
    if af_in(filter .. ':' .. gen .. ':' .. sub, sub, h1, h2) then return true end
  end
  return false
end

local function af_create(key, sub, expire_at)  -- its whole size at once (grown bit by bit, Redis would double it)
  if redis.call('EXISTS', key) == 0 then
    redis.call('SET', key, string.rep('\0', 2 ^ (AF_BASE_BITS + sub) / 8))
    redis.call('PEXPIREAT', key, expire_at)
  end
end

-- Add the ids whose hashes are argv[from..] (h1, h2 pairs) to the current generation, first starting the filter (its
-- coverage from now) or the next generation (the one before the previous dropped) when due.
local function af_add(filter, window_ms, argv, from)
  local now, run = af_now(), af_run_id()
  local f = redis.call('HMGET', filter, 'run', 'g', 'g_start', 'g_subs', 'g_n')
  local g, start, subs, n = tonumber(f[2]), tonumber(f[3]), tonumber(f[4]), tonumber(f[5])
  if not g then
    redis.call('HSET', filter, 'run', run, 'cover', now, 'p_subs', 0)
    g, start, subs, n, f[1] = 1, now, 1, 0, run
  elseif now - start >= window_ms then
    local dropped = tonumber(redis.call('HGET', filter, 'p_subs'))
    for sub = 0, dropped - 1 do redis.call('DEL', filter .. ':' .. (g - 1) .. ':' .. sub) end
    redis.call('HSET', filter, 'cover', start, 'p_subs', subs)
    g, start, subs, n = g + 1, now, 1, 0
  end
  local sub, expire_at = subs - 1, start + 3 * window_ms
  local key, capacity = filter .. ':' .. g .. ':' .. sub, af_capacity(sub)
  if from <= #argv then af_create(key, sub, expire_at) end
  local i = from
  while i <= #argv do
    -- A group never takes the sub-filter past its capacity (each id adds at most one): it rolls over where it did
    -- id by id.
    local room = sub < AF_LAST_SUB and math.max(1, math.min(AF_GROUP, capacity - n)) or AF_GROUP
    local last = math.min(#argv - 1, i + 2 * room - 2)
    n = n + af_set_group(key, sub, argv, i, last)
    i = last + 2
    if n >= capacity and sub < AF_LAST_SUB then
      sub, subs, n = sub + 1, subs + 1, 0
      key, capacity = filter .. ':' .. g .. ':' .. sub, af_capacity(sub)
      af_create(key, sub, expire_at)
    end
  end
  redis.call('HSET', filter, 'g', g, 'g_start', start, 'g_subs', subs, 'g_n', n)
  if f[1] == run then redis.call('HSET', filter, 'last', now) end  -- (after a restart: kept for the re-feed)
  redis.call('PEXPIRE', filter, 3 * window_ms)
  return run
end
