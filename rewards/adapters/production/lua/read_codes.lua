-- KEYS: the code hash and the code_uses list of each code; ARGV: how many of the latest uses to read. Returns, per
-- code, {its fields (flat; none if it does not exist), its latest uses}.
local found = {}
for i = 1, #KEYS, 2 do
  found[#found + 1] = {redis.call('HGETALL', KEYS[i]), redis.call('LRANGE', KEYS[i + 1], -tonumber(ARGV[1]), -1)}
end
return found
