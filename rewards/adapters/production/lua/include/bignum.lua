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
