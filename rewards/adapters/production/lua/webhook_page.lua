-- KEYS: the project's webhook deliveries, the endpoint's wh_due and wh_log. ARGV: the log member to list those before
-- ('+': from the newest), how many at most. Returns {document, due ('' when not pending), ...}, newest first.
local before = ARGV[1] == '+' and '+' or '(' .. ARGV[1]
local page = {}
for _, member in ipairs(redis.call('ZREVRANGEBYLEX', KEYS[3], before, '-', 'LIMIT', 0, tonumber(ARGV[2]))) do
  local id = string.sub(member, 17)
  local document = redis.call('HGET', KEYS[1], id)
  if document then
    page[#page + 1] = document
    page[#page + 1] = redis.call('ZSCORE', KEYS[2], id) or ''
  end
end
return page
