-- KEYS: the project's grants (hash: payout id → "<units>|<rule>"), their times (zset: payout id → ms), the paid
-- counters (hash: currency → units), the all-time counters (hash: <side>|<currency>|<user> → units).
-- ARGV: the prefix of the project's month and history keys, now (ms), the limits (JSON), the seeds (JSON), the asks
-- (JSON). rewards.domain.allotment.allot, line for line (tests/contract/test_allotment_store.py holds the two to the
-- same answers); amounts are decimal strings of integer units: Lua's numbers are doubles, exact only below 2^53.
-- Limits: {budgets = {cur = units}, caps = {cur = {{sides = {...}, units, window, window_ms}}}, history = {cur = ms},
--          kept_ms, grants_kept_ms}. An ask: {payout_id, user, side, currency, units, at_ms, month, month_kept_ms}.
-- Returns {"ok", units, rule, units, rule, ...} in the asks' order, or {"unseeded", currency, ...} (nothing counted).
local grants, grants_at, paid, totals = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix, now = ARGV[1], tonumber(ARGV[2])
local limits, seeds, asks = cjson.decode(ARGV[3]), cjson.decode(ARGV[4]), cjson.decode(ARGV[5])

-- Non-negative integers as decimal strings without leading zeros, in limbs of 7 digits (least significant first).
local BASE, WIDTH = 10000000, 7
local function limbs(s)
  local t, i = {}, #s
  while i >= 1 do
    local j = math.max(i - WIDTH + 1, 1)
    t[#t + 1] = tonumber(string.sub(s, j, i))
    i = j - 1
  end
  return t
end
local function text(t)
  local n = #t
  while n > 1 and t[n] == 0 do n = n - 1 end
  local parts = {tostring(t[n])}
  for k = n - 1, 1, -1 do parts[#parts + 1] = string.format('%07d', t[k]) end
  return table.concat(parts)
end
local function cmp(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  for k = 1, #a do
    local x, y = string.byte(a, k), string.byte(b, k)
    if x ~= y then return x < y and -1 or 1 end
  end
  return 0
end
local function add(a, b)
  local x, y, r, carry = limbs(a), limbs(b), {}, 0
  for k = 1, math.max(#x, #y) do
    local v = (x[k] or 0) + (y[k] or 0) + carry
    if v >= BASE then r[k], carry = v - BASE, 1 else r[k], carry = v, 0 end
  end
  if carry > 0 then r[#r + 1] = carry end
  return text(r)
end
local function sub(a, b) -- a - b, or "0" when b >= a (a room never goes below nothing)
  if cmp(a, b) <= 0 then return '0' end
  local x, y, r, borrow = limbs(a), limbs(b), {}, 0
  for k = 1, #x do
    local v = x[k] - (y[k] or 0) - borrow
    if v < 0 then r[k], borrow = v + BASE, 1 else r[k], borrow = v, 0 end
  end
  return text(r)
end

local function ms(x) return string.format('%d', x) end -- not tostring's %.14g
local function counter(key, field) return redis.call('HGET', key, field) or '0' end
local function month_key(month) return prefix .. 'month:' .. month end
local function history_key(side, cur, user) return prefix .. 'hist:' .. side .. '|' .. cur .. '|' .. user end

-- Budgets without a paid counter: seeded, or the caller must seed them (nothing is counted before).
for cur, units in pairs(seeds) do
  if limits.budgets[cur] then redis.call('HSETNX', paid, cur, units) end
end
local unseeded = {}
for _, ask in ipairs(asks) do
  local cur = ask[4]
  if limits.budgets[cur] and not unseeded[cur] and redis.call('HEXISTS', paid, cur) == 0 then
    unseeded[cur] = true
    unseeded[#unseeded + 1] = cur
  end
end
if #unseeded > 0 then
  table.sort(unseeded)
  local answer = {'unseeded'}
  for _, cur in ipairs(unseeded) do answer[#answer + 1] = cur end
  return answer
end

-- allotment.rolling_room: the cap less the most any window of W holding `at` holds.
local function rolling_room(cap, window, at, keys)
  local near = {}
  for _, key in ipairs(keys) do
    local found = redis.call('ZRANGEBYSCORE', key, '(' .. ms(at - window), '(' .. ms(at + window), 'WITHSCORES')
    for i = 1, #found, 2 do
      local units = string.match(found[i], '|(%d+)$')
      near[#near + 1] = {tonumber(found[i + 1]), units}
    end
  end
  table.sort(near, function(p, q) return p[1] < q[1] end)
  local ends = {at}
  for _, g in ipairs(near) do if g[1] > at then ends[#ends + 1] = g[1] end end
  local most, total, start, stop = '0', '0', 1, 1
  for _, e in ipairs(ends) do
    while stop <= #near and near[stop][1] <= e do total = add(total, near[stop][2]); stop = stop + 1 end
    while start < stop and near[start][1] <= e - window do total = sub(total, near[start][2]); start = start + 1 end
    if cmp(total, most) > 0 then most = total end
  end
  return sub(cap, most)
end

local function cap_room(cap, ask)
  local sides, user, cur, at = cap[1], ask[2], ask[4], ask[6]
  local window = cap[3]
  if window == 'all_time' then
    local used = '0'
    for _, side in ipairs(sides) do used = add(used, counter(totals, side .. '|' .. cur .. '|' .. user)) end
    return sub(cap[2], used)
  end
  if window == 'calendar_month' then
    if ask[8] <= now then return '0' end
    local used = '0'
    for _, side in ipairs(sides) do used = add(used, counter(month_key(ask[7]), side .. '|' .. cur .. '|' .. user)) end
    return sub(cap[2], used)
  end
  if at <= now - limits.kept_ms then return '0' end
  local keys = {}
  for _, side in ipairs(sides) do keys[#keys + 1] = history_key(side, cur, user) end
  return rolling_room(cap[2], cap[4], at, keys)
end

-- allotment.grant: the least room cuts; among equal rooms a budget is named first.
local function decide(ask)
  local units, cur, least, rule = ask[5], ask[4], nil, ''
  local budget = limits.budgets[cur]
  if budget then least, rule = sub(budget, redis.call('HGET', paid, cur)), 'budget_exhausted' end
  for _, cap in ipairs(limits.caps[cur] or {}) do
    local covers = false
    for _, side in ipairs(cap[1]) do if side == ask[3] then covers = true end end
    if covers then
      local room = cap_room(cap, ask)
      if least == nil or cmp(room, least) < 0 then least, rule = room, 'cap_exceeded' end
    end
  end
  if least == nil or cmp(least, units) >= 0 then return units, '' end
  return least, rule
end

local function record(ask, units, rule)
  local id, user, side, cur, at = ask[1], ask[2], ask[3], ask[4], ask[6]
  redis.call('HSET', grants, id, units .. '|' .. rule)
  redis.call('ZADD', grants_at, ms(now), id)
  if units == '0' then return end
  if limits.budgets[cur] then redis.call('HSET', paid, cur, add(redis.call('HGET', paid, cur), units)) end
  if not limits.caps[cur] then return end
  local field = side .. '|' .. cur .. '|' .. user
  redis.call('HSET', totals, field, add(counter(totals, field), units))
  local month = month_key(ask[7])
  redis.call('HSET', month, field, add(counter(month, field), units))
  redis.call('PEXPIREAT', month, ms(ask[8]))
  local kept = limits.history[cur]
  if kept then
    local key = history_key(side, cur, user)
    redis.call('ZADD', key, ms(at), id .. '|' .. units)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', ms(now - kept))
    local latest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if latest[2] then redis.call('PEXPIREAT', key, ms(tonumber(latest[2]) + kept)) end -- (none: too old to keep)
  end
end

-- Grants never forgotten (a crash after their rows' write): dropped once past keeping.
local stale = redis.call('ZRANGEBYSCORE', grants_at, '-inf', ms(now - limits.grants_kept_ms), 'LIMIT', 0, 256)
for _, id in ipairs(stale) do redis.call('HDEL', grants, id); redis.call('ZREM', grants_at, id) end

local answer = {'ok'}
for _, ask in ipairs(asks) do
  local known = redis.call('HGET', grants, ask[1])
  local units, rule
  if known then
    units, rule = string.match(known, '^(%d+)|(.*)$')
    if cmp(ask[5], units) < 0 then units = ask[5] end
  else
    units, rule = decide(ask)
    record(ask, units, rule)
  end
  answer[#answer + 1] = units
  answer[#answer + 1] = rule
end
return answer
