-- KEYS: referrals; ARGV: depth, then the users. Returns one chain per user.
--#include include/chain.lua
local chains, depth = {}, tonumber(ARGV[1])
for i = 2, #ARGV do
  chains[#chains + 1] = chain(KEYS[1], ARGV[i], depth)
end
return chains
