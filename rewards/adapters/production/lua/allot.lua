-- KEYS: the project's deliveries' grants (hash: delivery token → "<fingerprint>\n<cuts JSON>"), their times (zset:
-- token → ms), the paid counters (hash: currency → units), the all-time counters (hash: <side>|<currency>|<user> →
-- units). ARGV: the prefix of the project's month and history keys, now (ms), the limits (JSON), the seeds (JSON), the
-- asks (JSON), the delivery's token, the asks' fingerprint.
-- rewards.domain.allotment.allot, line for line (tests/contract/test_allotment_store.py holds the two to the same
-- answers); amounts are decimal strings of integer units: Lua's numbers are doubles, exact only below 2^53.
-- Limits: {budgets = {cur = units}, caps = {cur = {{sides = {...}, units, window, window_ms}}}, history = {cur = ms},
--          kept_ms, grants_kept_ms}. An ask: {payout_id, user, side, currency, units, at_ms, month, month_kept_ms}.
-- Returns {"ok", cuts} (allotment.cuts_of: [index from 0, units, rule, ...] of the asks not granted whole, as JSON),
-- the same cuts again for a delivery asking what it asked before (nothing counted twice), or {"unseeded", currency,
-- ...} (nothing counted). Like allotment.allot, users far from their caps are granted at once (their counters read
-- once), and only the others are decided one by one.
local deliveries, deliveries_at, paid, totals = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local delivery, fingerprint = ARGV[6], ARGV[7]
local prefix, now = ARGV[1], tonumber(ARGV[2])
local limits, seeds, asks = cjson.decode(ARGV[3]), cjson.decode(ARGV[4]), cjson.decode(ARGV[5])

--#include include/bignum.lua

-- A sum kept in limbs, added to in place (a delivery sums thousands of asks: no string per step).
local function accumulate(acc, s)
  local i, k, carry = #s, 1, 0
  while i >= 1 or carry > 0 do
    local v = (acc[k] or 0) + carry
    if i >= 1 then
      local j = math.max(i - WIDTH + 1, 1)
      v = v + tonumber(string.sub(s, j, i))
      i = j - 1
    end
    if v >= BASE then acc[k], carry = v - BASE, 1 else acc[k], carry = v, 0 end
    k = k + 1
  end
  return acc
end

local function ms(x) return string.format('%d', x) end -- not tostring's %.14g
local function counter(key, field) return redis.call('HGET', key, field) or '0' end
local function month_key(month) return prefix .. 'month:' .. month end
-- A user's counter of one side and currency: the currency's length first, so no address can pass for another's.
local function field(side, cur, user) return side .. '|' .. #cur .. ':' .. cur .. '|' .. user end
local function history_key(side, cur, user) return prefix .. 'hist:' .. field(side, cur, user) end

-- Deliveries' grants never forgotten (a crash after their write): dropped once past keeping.
local stale = redis.call('ZRANGEBYSCORE', deliveries_at, '-inf', ms(now - limits.grants_kept_ms), 'LIMIT', 0, 256)
for _, id in ipairs(stale) do redis.call('HDEL', deliveries, id); redis.call('ZREM', deliveries_at, id) end

-- The same delivery asking the same again (read again after a crash): its grants, counted once.
local kept = redis.call('HGET', deliveries, delivery)
if kept then
  local asked, cuts = string.match(kept, '^([^\n]*)\n(.*)$')
  if asked == fingerprint then return {'ok', cuts} end
end

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
    for _, side in ipairs(sides) do used = add(used, counter(totals, field(side, cur, user))) end
    return sub(cap[2], used)
  end
  if window == 'calendar_month' then
    if ask[8] <= now then return '0' end
    local used = '0'
    for _, side in ipairs(sides) do used = add(used, counter(month_key(ask[7]), field(side, cur, user))) end
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

local function record(ask, units)
  local id, user, side, cur, at = ask[1], ask[2], ask[3], ask[4], ask[6]
  if units == '0' then return end
  if limits.budgets[cur] then redis.call('HSET', paid, cur, add(redis.call('HGET', paid, cur), units)) end
  if not limits.caps[cur] then return end
  local field = field(side, cur, user)
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

-- Many fields or members per command, in chunks (Lua's unpack has a bounded stack).
local CHUNK = 1000
local function each_chunk(list, call)
  for first = 1, #list, CHUNK do call(unpack(list, first, math.min(first + CHUNK - 1, #list))) end
end

-- allotment._fits: one user's asks of one currency all fit under a cap, whatever their order.
local function fits(cap, own)
  local sides, window = cap[1], cap[3]
  local covered, asked = {}, {}
  for _, ask in ipairs(own) do
    for _, side in ipairs(sides) do
      if side == ask[3] then covered[#covered + 1] = ask; accumulate(asked, ask[5]) end
    end
  end
  if #covered == 0 then return true end
  local user, cur = covered[1][2], covered[1][4]
  if window == 'all_time' then
    for _, side in ipairs(sides) do accumulate(asked, counter(totals, field(side, cur, user))) end
    return cmp(text(asked), cap[2]) <= 0
  end
  if window == 'calendar_month' then
    local months = {}
    for _, ask in ipairs(covered) do
      if ask[8] <= now then return false end
      months[ask[7]] = accumulate(months[ask[7]] or {}, ask[5])
    end
    for month, sum in pairs(months) do
      for _, side in ipairs(sides) do accumulate(sum, counter(month_key(month), field(side, cur, user))) end
      if cmp(text(sum), cap[2]) > 0 then return false end
    end
    return true
  end
  local lo, hi = math.huge, -math.huge
  for _, ask in ipairs(covered) do
    if ask[6] <= now - limits.kept_ms then return false end
    lo, hi = math.min(lo, ask[6]), math.max(hi, ask[6])
  end
  local ever = accumulate({}, text(asked))
  for _, side in ipairs(sides) do accumulate(ever, counter(totals, field(side, cur, user))) end
  if cmp(text(ever), cap[2]) <= 0 then return true end -- all it ever counted bounds any span: no history read
  for _, side in ipairs(sides) do
    local found = redis.call('ZRANGEBYSCORE', history_key(side, cur, user), '(' .. ms(lo - cap[4]), '(' .. ms(hi + cap[4]))
    for _, member in ipairs(found) do accumulate(asked, string.match(member, '|(%d+)$')) end
  end
  return cmp(text(asked), cap[2]) <= 0
end

-- The asks granted whole, counted in bulk: each counter read and written once.
local function record_whole(whole)
  local sums, order = {}, {}
  local function count(key, field, units, expires)
    local id = key .. '\0' .. field
    if not sums[id] then sums[id] = {key, field, {}, expires}; order[#order + 1] = id end
    accumulate(sums[id][3], units)
  end
  local history = {}
  for _, ask in ipairs(whole) do
    local id, user, side, cur, units = ask[1], ask[2], ask[3], ask[4], ask[5]
    if units ~= '0' then
      if limits.budgets[cur] then count(paid, cur, units) end
      if limits.caps[cur] then
        local field = field(side, cur, user)
        count(totals, field, units)
        count(month_key(ask[7]), field, units, ask[8])
        if limits.history[cur] then
          local key = history_key(side, cur, user)
          if not history[key] then history[key] = {kept = limits.history[cur], pairs = {}} end
          local list = history[key].pairs
          list[#list + 1] = ms(ask[6]); list[#list + 1] = id .. '|' .. units
        end
      end
    end
  end
  for _, id in ipairs(order) do
    local key, field, sum, expires = unpack(sums[id])
    redis.call('HSET', key, field, text(accumulate(sum, counter(key, field))))
    if expires then redis.call('PEXPIREAT', key, ms(expires)) end
  end
  for key, entry in pairs(history) do
    each_chunk(entry.pairs, function(...) redis.call('ZADD', key, ...) end)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', ms(now - entry.kept))
    local latest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if latest[2] then redis.call('PEXPIREAT', key, ms(tonumber(latest[2]) + entry.kept)) end
  end
end

-- Each payout's first ask in this call (one asked again gets its grant, counted once).
local first = {}
for n, ask in ipairs(asks) do
  if not first[ask[1]] then first[ask[1]] = n end
end

-- allotment._sorted_out: by currency, then by user.
local currencies, by_currency = {}, {}
for n, ask in ipairs(asks) do
  if first[ask[1]] == n then
    local cur = ask[4]
    if not by_currency[cur] then by_currency[cur] = {asks = {}, sum = {}}; currencies[#currencies + 1] = cur end
    local group = by_currency[cur]
    group.asks[#group.asks + 1] = n
    accumulate(group.sum, ask[5])
  end
end
local whole, one_by_one, decided = {}, {}, {}
for _, cur in ipairs(currencies) do
  local group, budget = by_currency[cur], limits.budgets[cur]
  if budget and cmp(text(accumulate(group.sum, redis.call('HGET', paid, cur))), budget) > 0 then
    for _, n in ipairs(group.asks) do one_by_one[#one_by_one + 1] = n end
  else
    local users, by_user = {}, {}
    for _, n in ipairs(group.asks) do
      local user = asks[n][2]
      if not by_user[user] then by_user[user] = {}; users[#users + 1] = user end
      by_user[user][#by_user[user] + 1] = n
    end
    for _, user in ipairs(users) do
      local own = {}
      for _, n in ipairs(by_user[user]) do own[#own + 1] = asks[n] end
      local ok = true
      for _, cap in ipairs(limits.caps[cur] or {}) do
        if not fits(cap, own) then ok = false; break end
      end
      for _, n in ipairs(by_user[user]) do
        if ok then whole[#whole + 1] = asks[n]; decided[n] = {asks[n][5], ''}
        else one_by_one[#one_by_one + 1] = n end
      end
    end
  end
end
record_whole(whole)
table.sort(one_by_one)
for _, n in ipairs(one_by_one) do
  local units, rule = decide(asks[n])
  record(asks[n], units)
  decided[n] = {units, rule}
end

local cuts = {}
for n, ask in ipairs(asks) do
  local units, rule = decided[first[ask[1]]][1], decided[first[ask[1]]][2]
  if cmp(ask[5], units) < 0 then units = ask[5] end
  if rule ~= '' or units ~= ask[5] then
    cuts[#cuts + 1] = n - 1
    cuts[#cuts + 1] = units
    cuts[#cuts + 1] = rule
  end
end
local encoded = #cuts > 0 and cjson.encode(cuts) or '[]' -- (cjson writes an empty table as {})
redis.call('HSET', deliveries, delivery, fingerprint .. '\n' .. encoded)
redis.call('ZADD', deliveries_at, ms(now), delivery)
return {'ok', encoded}
