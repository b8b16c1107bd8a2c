-- KEYS: the project's webhook deliveries, the endpoint's wh_due and wh_log. ARGV: how many of the newest to pass,
-- how many at most after them. Returns {the log's size, document, due ('' when not pending), ...}, newest first (the
-- log's members are `<created_ms, 15 digits>:<id>`: lex order is (created_ms, id) order).
local page = {redis.call('ZCARD', KEYS[3])}
local limit = tonumber(ARGV[2])
if limit > 0 then
  for _, member in ipairs(redis.call('ZREVRANGEBYLEX', KEYS[3], '+', '-', 'LIMIT', tonumber(ARGV[1]), limit)) do
    local id = string.sub(member, 17)
    local document = redis.call('HGET', KEYS[1], id)
    if document then
      page[#page + 1] = document
      page[#page + 1] = redis.call('ZSCORE', KEYS[2], id) or ''
    end
  end
end
return page
