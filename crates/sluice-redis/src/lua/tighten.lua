-- tighten: the provider reported only ARGV[1] units left of one dimension; hold every
-- listed bucket of the scope to at most that much available now (owing at least
-- burst - remaining, never more than the provider's reset). Never loosens a bucket.
-- KEYS[1] the group's state hash
-- ARGV[1] remaining, ARGV[2] reset (µs, -1 for none), then per bucket: its field, amount,
-- period (µs), burst
local now = now_us()
local remaining = tonumber(ARGV[1])
local reset = tonumber(ARGV[2])
local lims, fields = {}, {}
local i = 3
while ARGV[i] do
  lims[#lims + 1] = {a = tonumber(ARGV[i + 1]), p = tonumber(ARGV[i + 2]), b = tonumber(ARGV[i + 3]), f = ARGV[i]}
  fields[#fields + 1] = ARGV[i]
  i = i + 4
end
fields[#fields + 1] = '@x'
local h = redis.call('HMGET', KEYS[1], unpack(fields))
local writes = {}
local needed = 0
for j, lim in ipairs(lims) do
  local owed = units_us(lim, lim.b) - units_us(lim, math.min(remaining, lim.b))
  if reset >= 0 then owed = math.min(owed, reset) end
  if now + owed > tonumber(h[j] or '0') then
    writes[#writes + 1] = lim.f
    writes[#writes + 1] = now + owed
  end
  needed = math.max(needed, owed)
end
local ms = expiry(h[#fields], now, needed, writes, #writes)
if #writes > 0 then
  write_state(KEYS[1], writes, ms)
end
return 1
