-- KEYS: the project's webhook deliveries, the endpoint's wh_due. ARGV: the delivery's id.
-- Returns {its document, when it is due ('' when not pending)}, or {} when it is not held.
local document = redis.call('HGET', KEYS[1], ARGV[1])
if not document then return {} end
return {document, redis.call('ZSCORE', KEYS[2], ARGV[1]) or ''}
