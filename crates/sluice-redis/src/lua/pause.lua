-- pause: holds a scope back until now + ARGV[1] microseconds; never shortens a pause.
-- KEYS[1] the group's state hash, ARGV[2] the scope's field
local now = now_us()
local wait = tonumber(ARGV[1])
local raw = call('HMGET', KEYS[1], '@x', ARGV[2])
local s = scope_state(raw[2], nil)
if now + wait > s[2] then
  s[2] = now + wait
  local writes = {ARGV[2], pack(s)}
  write_state(KEYS[1], writes, expiry(raw[1], now, wait, writes, 2))
end
return 1
