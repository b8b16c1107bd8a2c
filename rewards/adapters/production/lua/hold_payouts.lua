-- KEYS: the payouts' held keys; ARGV: each one's pending_payouts row (JSON). A payout held or decided already (its
-- key holds its row, or 'decided') is left as it is.
for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[i], 'NX') end
return 1
