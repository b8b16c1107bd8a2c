-- KEYS, and ARGV but the tallies in place of the asks: allot.lua's.
-- rewards.domain.allotment.allot_tallies, line for line (tests/contract/test_allotment_store.py holds the two to the
-- same answers): the common case at once. A tally is one user's payouts of one side and currency in the delivery,
-- summed: {user, side, currency, units, {{month, units, month_kept_ms}…}, first_ms, last_ms, "<ms>:<units>,…"}.
-- Returns {"ok", verdicts} (a character per tally: "W" granted whole and counted, "E" its budget spent, "1" to be
-- decided payout by payout by allot.lua), the same again for a delivery asking what it asked before, or
-- {"unseeded", currency, ...} (nothing counted).
--#include include/allot_book.lua
local tallies = asked

local kept = kept_answer()
if kept then return {'ok', kept} end
local currencies = {}
for _, tally in ipairs(tallies) do currencies[tally[3]] = true end
local unseeded = unseeded_of(currencies)
if unseeded then return unseeded end

-- allotment._fits: one user's tallies of one currency all fit under a cap, whatever the order of their payouts.
local function fits(cap, own)
  local sides, window = cap[1], cap[3]
  local covered, asked = {}, {}
  for _, tally in ipairs(own) do
    for _, side in ipairs(sides) do
      if side == tally[2] then covered[#covered + 1] = tally; accumulate(asked, tally[4]) end
    end
  end
  if #covered == 0 then return true end
  local user, cur = covered[1][1], covered[1][3]
  if window == 'all_time' then
    for _, side in ipairs(sides) do accumulate(asked, counter(totals, field(side, cur, user))) end
    return cmp(text(asked), cap[2]) <= 0
  end
  if window == 'calendar_month' then
    local months, names = {}, {}
    for _, tally in ipairs(covered) do
      for _, month in ipairs(tally[5]) do
        if month[3] <= now then return false end -- its month's counters are gone
        if not months[month[1]] then months[month[1]] = {}; names[#names + 1] = month[1] end
        accumulate(months[month[1]], month[2])
      end
    end
    for _, month in ipairs(names) do
      local sum = months[month]
      for _, side in ipairs(sides) do accumulate(sum, counter(month_key(month), field(side, cur, user))) end
      if cmp(text(sum), cap[2]) > 0 then return false end
    end
    return true
  end
  local lo, hi = math.huge, -math.huge
  for _, tally in ipairs(covered) do lo, hi = math.min(lo, tally[6]), math.max(hi, tally[7]) end
  if lo <= now - limits.kept_ms then return false end
  local ever = accumulate({}, text(asked))
  for _, side in ipairs(sides) do accumulate(ever, counter(totals, field(side, cur, user))) end
  if cmp(text(ever), cap[2]) <= 0 then return true end -- all it ever counted bounds any span: no history read
  local keys = {}
  for _, side in ipairs(sides) do keys[#keys + 1] = history_key(side, cur, user) end
  for _, grant in ipairs(grants_near(keys, lo - cap[4], hi + cap[4])) do accumulate(asked, grant[2]) end
  return cmp(text(asked), cap[2]) <= 0
end

local verdicts, order, by_currency = {}, {}, {}
for n, tally in ipairs(tallies) do
  verdicts[n] = '1'
  tally[9] = tostring(n)
  local cur = tally[3]
  if not by_currency[cur] then by_currency[cur] = {}; order[#order + 1] = cur end
  local numbers = by_currency[cur]
  numbers[#numbers + 1] = n
end
local whole = {}
for _, cur in ipairs(order) do
  local numbers, budget, open = by_currency[cur], limits.budgets[cur], true
  if budget then
    local spent = redis.call('HGET', paid, cur)
    if cmp(spent, budget) >= 0 then -- every payout's room is 0, and a budget is named before a cap leaving as little
      for _, n in ipairs(numbers) do verdicts[n] = 'E' end
      open = false
    else
      local sum = accumulate({}, spent)
      for _, n in ipairs(numbers) do accumulate(sum, tallies[n][4]) end
      open = cmp(text(sum), budget) <= 0 -- else the budget may bind: order matters
    end
  end
  if open then
    local users, by_user = {}, {}
    for _, n in ipairs(numbers) do
      local user = tallies[n][1]
      if not by_user[user] then by_user[user] = {}; users[#users + 1] = user end
      by_user[user][#by_user[user] + 1] = n
    end
    for _, user in ipairs(users) do
      local own = {}
      for _, n in ipairs(by_user[user]) do own[#own + 1] = tallies[n] end
      local ok = true
      for _, cap in ipairs(limits.caps[cur] or {}) do
        if not fits(cap, own) then ok = false; break end
      end
      if ok then
        for _, n in ipairs(by_user[user]) do verdicts[n] = 'W'; whole[#whole + 1] = tallies[n] end
      end
    end
  end
end
count(whole)
local answer = table.concat(verdicts)
keep(answer)
return {'ok', answer}
