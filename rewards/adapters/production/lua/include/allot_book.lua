-- The book of caps and budgets (rewards.domain.allotment.Book) over a project's keys, shared by allot.lua and
-- allot_tallies.lua, which share their KEYS and ARGV (allot.lua's first lines); `asked`: what each asks, decoded.
-- Amounts are decimal strings of integer units: Lua's numbers are doubles, exact only below 2^53.
--#include include/bignum.lua
local deliveries, deliveries_at, paid, totals = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix, now = ARGV[1], tonumber(ARGV[2])
local limits, seeds, asked = cjson.decode(ARGV[3]), cjson.decode(ARGV[4]), cjson.decode(ARGV[5])
local delivery, fingerprint = ARGV[6], ARGV[7]

-- A sum kept in limbs, added to in place (a delivery sums thousands of amounts: no string per step).
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

-- The grants by time of `keys` in (after, before), as {ms, units}. A member holds one call's grants of a user:
-- "<id>|<ms>:<units>,<ms>:<units>…", scored by its latest time (so every member holding a time past `after` scores
-- past it); one written before tallies holds one grant, "<id>|<units>", scored by its time.
local function grants_near(keys, after, before)
  local near = {}
  for _, key in ipairs(keys) do
    local found = redis.call('ZRANGEBYSCORE', key, '(' .. ms(after), '+inf', 'WITHSCORES')
    for i = 1, #found, 2 do
      local grants = string.match(found[i], '|([^|]*)$')
      if string.find(grants, ':', 1, true) then
        for at, units in string.gmatch(grants, '(%d+):(%d+)') do
          local t = tonumber(at)
          if t > after and t < before then near[#near + 1] = {t, units} end
        end
      else
        local t = tonumber(found[i + 1])
        if t < before then near[#near + 1] = {t, grants} end
      end
    end
  end
  return near
end

-- Deliveries' answers never forgotten (a crash after their write) are dropped once past keeping; the answer this
-- delivery got when it asked the same before (read again after a crash), or nil.
local function kept_answer()
  local stale = redis.call('ZRANGEBYSCORE', deliveries_at, '-inf', ms(now - limits.grants_kept_ms), 'LIMIT', 0, 256)
  for _, id in ipairs(stale) do redis.call('HDEL', deliveries, id); redis.call('ZREM', deliveries_at, id) end
  local kept = redis.call('HGET', deliveries, delivery)
  if kept then
    local asked, answer = string.match(kept, '^([^\n]*)\n(.*)$')
    if asked == fingerprint then return answer end
  end
  return nil
end

local function keep(answer)
  redis.call('HSET', deliveries, delivery, fingerprint .. '\n' .. answer)
  redis.call('ZADD', deliveries_at, ms(now), delivery)
end

-- Budgets without a paid counter: seeded, or the caller must seed them ({"unseeded", currency, ...}; nil if none).
local function unseeded_of(currencies)
  for cur, units in pairs(seeds) do
    if limits.budgets[cur] then redis.call('HSETNX', paid, cur, units) end
  end
  local unseeded = {}
  for cur in pairs(currencies) do
    if limits.budgets[cur] and redis.call('HEXISTS', paid, cur) == 0 then unseeded[#unseeded + 1] = cur end
  end
  if #unseeded == 0 then return nil end
  table.sort(unseeded)
  local answer = {'unseeded'}
  for _, cur in ipairs(unseeded) do answer[#answer + 1] = cur end
  return answer
end

-- Book.count: granted tallies ({user, side, currency, units, {{month, units, kept_ms}…}, first_ms, last_ms,
-- "<ms>:<units>,…", id unique in the call}) into the paid counter and what the caps covering their side read
-- (limits.counts: "t" all-time, "m" month counters, each read and written once; "h" the grants by time).
local function count(granted)
  local sums, order = {}, {}
  local function add_to(key, field, units, expires)
    local id = key .. '\0' .. field
    if not sums[id] then sums[id] = {key, field, {}, expires}; order[#order + 1] = id end
    accumulate(sums[id][3], units)
  end
  for _, tally in ipairs(granted) do
    local user, side, cur, units = tally[1], tally[2], tally[3], tally[4]
    if limits.budgets[cur] then add_to(paid, cur, units) end
    local counts = limits.counts[cur] and limits.counts[cur][side] or '' -- allotment.Limits.counts
    if counts ~= '' then
      local field = field(side, cur, user)
      if string.find(counts, 't', 1, true) then add_to(totals, field, units) end
      if string.find(counts, 'm', 1, true) then
        for _, month in ipairs(tally[5]) do add_to(month_key(month[1]), field, month[2], month[3]) end
      end
      if string.find(counts, 'h', 1, true) then
        local key, kept = history_key(side, cur, user), limits.history[cur]
        redis.call('ZADD', key, ms(tally[7]), delivery .. '#' .. tally[9] .. '#' .. ms(now) .. '|' .. tally[8])
        redis.call('ZREMRANGEBYSCORE', key, '-inf', ms(now - kept))
        local latest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
        if latest[2] then redis.call('PEXPIREAT', key, ms(tonumber(latest[2]) + kept)) end -- (none: too old to keep)
      end
    end
  end
  for _, id in ipairs(order) do
    local key, field, sum, expires = unpack(sums[id])
    redis.call('HSET', key, field, text(accumulate(sum, counter(key, field))))
    if expires then redis.call('PEXPIREAT', key, ms(expires)) end
  end
end
