-- KEYS: the relay's index. Returns {now (ms, Redis time), {project, last touched, ...}}.
--#include include/now.lua
return {now_ms(), redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')}
