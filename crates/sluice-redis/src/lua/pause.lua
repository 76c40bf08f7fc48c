-- pause: holds a scope back until now + ARGV[1] microseconds; never shortens a pause.
-- KEYS[1] the group's state hash, ARGV[2] the scope's id
local now = now_us()
local wait = tonumber(ARGV[1])
local until_us = now + wait
local field = ARGV[2] .. '|p'
local h = redis.call('HMGET', KEYS[1], field, '@x')
local writes = {}
if until_us > tonumber(h[1] or '0') then
  writes[1] = field
  writes[2] = until_us
end
local ms = expiry(h[2], now, wait, writes, #writes)
if #writes > 0 then
  write_state(KEYS[1], writes, ms)
end
return 1
