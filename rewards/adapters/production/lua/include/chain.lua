-- Walks referrer edges up from `start`, as SqliteStateStore._chain: stops at the top, at `depth`
-- referrers, or on meeting a referrer already in the chain.
local function chain(referrals, start, depth)
  local found, seen = {}, {}
  local edge = redis.call('HGET', referrals, start)
  while edge and #found < depth do
    local by = cjson.decode(edge).by
    if seen[by] then break end
    seen[by] = true
    found[#found + 1] = by
    edge = redis.call('HGET', referrals, by)
  end
  return found, seen
end
