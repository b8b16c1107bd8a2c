-- KEYS: the project's deliveries' answers (hash: token → "<fingerprint>\n<answer>"), their times (zset: token → ms),
-- the paid counters (hash: currency → units), the all-time counters (hash: <side>|<len>:<currency>|<user> → units).
-- ARGV: the prefix of the project's month and history keys, now (ms), the limits (JSON), the seeds (JSON), the asks
-- (JSON), the delivery's token, the asks' fingerprint.
-- rewards.domain.allotment.allot_each, line for line (tests/contract/test_allotment_store.py holds the two to the same
-- answers): each ask decided and counted in before the next.
-- Limits: {budgets = {cur = units}, caps = {cur = {{sides = {...}, units, window, window_ms}}}, history = {cur = ms},
--          counts = {cur = {side = "tmh"}}, kept_ms, grants_kept_ms}. An ask: {payout_id, user, side, currency, units,
--          at_ms, month, month_kept_ms}.
-- Returns {"ok", cuts} (allotment.cuts_of: [index from 0, units, rule, ...] of the asks not granted whole, as JSON),
-- the same cuts again for a delivery asking what it asked before (nothing counted twice), or {"unseeded", currency,
-- ...} (nothing counted).
--#include include/allot_book.lua
local asks = asked

local kept = kept_answer()
if kept then return {'ok', kept} end
local currencies = {}
for _, ask in ipairs(asks) do currencies[ask[4]] = true end
local unseeded = unseeded_of(currencies)
if unseeded then return unseeded end

-- allotment.rolling_room: the cap less the most any window of W holding `at` holds.
local function rolling_room(cap, window, at, keys)
  local near = grants_near(keys, at - window, at + window)
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

local first, cuts = {}, {}
for n, ask in ipairs(asks) do
  local earlier = first[ask[1]]
  local units, rule
  if earlier then -- a payout asked again in this call: its first ask's grant, counted once
    units, rule = earlier[1], earlier[2]
    if cmp(ask[5], units) < 0 then units = ask[5] end
  else
    units, rule = decide(ask)
    first[ask[1]] = {units, rule}
    if units ~= '0' then
      local at = ask[6]
      count({{ask[2], ask[3], ask[4], units, {{ask[7], units, ask[8]}}, at, at, ms(at) .. ':' .. units, ask[1]}})
    end
  end
  if rule ~= '' or units ~= ask[5] then
    cuts[#cuts + 1] = n - 1
    cuts[#cuts + 1] = units
    cuts[#cuts + 1] = rule
  end
end
local encoded = #cuts > 0 and cjson.encode(cuts) or '[]' -- (cjson writes an empty table as {})
keep(encoded)
return {'ok', encoded}
