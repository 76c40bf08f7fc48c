-- tighten: the provider reported only ARGV[1] units left of one dimension; hold every
-- listed bucket of the scope to at most that much available now (owing at least
-- burst - remaining, never more than the provider's reset). Never loosens a bucket.
-- KEYS[1] the group's state hash
-- ARGV[1] remaining, ARGV[2] reset (µs, -1 for none), ARGV[3] the scope's field, ARGV[4]
-- its layout, then per bucket: its position (from 1), amount, period (µs), burst
local now = now_us()
local remaining = tonumber(ARGV[1])
local reset = tonumber(ARGV[2])
local raw = call('HMGET', KEYS[1], '@x', ARGV[3])
local s = scope_state(raw[2], tonumber(ARGV[4]))
local needed, changed = 0, false
local i = 5
while ARGV[i] do
  local at = 4 + tonumber(ARGV[i])
  local lim = {a = tonumber(ARGV[i + 1]), p = tonumber(ARGV[i + 2]), b = tonumber(ARGV[i + 3])}
  local owed = units_us(lim, lim.b) - units_us(lim, math.min(remaining, lim.b))
  if reset >= 0 then owed = math.min(owed, reset) end
  if now + owed > (s[at] or 0) then
    s[at] = now + owed
    changed = true
  end
  needed = max(needed, owed)
  i = i + 4
end
write_buckets(KEYS[1], raw[1], ARGV[3], s, changed, now, needed)
return 1
