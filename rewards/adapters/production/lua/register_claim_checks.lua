-- KEYS: claim check keys; ARGV: their records. Registers, all at once, those not registered yet.
for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[i], 'NX') end
return 1
