-- KEYS: requests, pending, by_user. ARGV: how many, the unit separator. The oldest pending requests (JSON, each with
-- its member), each taken: its user's by_user entry dropped, so that a request made after this is a new one.
local taken = {}
for _, member in ipairs(redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1)) do
  local stored = redis.call('HGET', KEYS[1], member)
  if stored then
    local request = cjson.decode(stored)
    local project = string.sub(member, 1, string.find(member, ARGV[2], 1, true) - 1)
    local field = project .. ARGV[2] .. request['type'] .. ':' .. request['identifier']
    if redis.call('HGET', KEYS[3], field) == member then redis.call('HDEL', KEYS[3], field) end
    table.insert(taken, member)
    table.insert(taken, stored)
  end
end
return taken
