-- pause: holds a scope back until now + ARGV[1] microseconds; never shortens a pause.
-- KEYS[1] scope hash
local now = now_us()
local wait = tonumber(ARGV[1])
local until_us = now + wait
local current = tonumber(redis.call('HGET', KEYS[1], 'p') or '0')
if until_us > current then
  redis.call('HSET', KEYS[1], 'p', until_us)
end
keep_alive(KEYS[1], wait)
return 1
