-- tighten: the provider reported only ARGV[1] units left of one dimension; hold every
-- listed bucket of the scope to at most that much available now (owing at least
-- burst - remaining, never more than the provider's reset). Never loosens a bucket.
-- KEYS[1] scope hash
-- ARGV[1] remaining, ARGV[2] reset (us, -1 for none), then per bucket: dimension code,
-- amount, period (us), burst
local now = now_us()
local remaining = tonumber(ARGV[1])
local reset = tonumber(ARGV[2])
local needed = 0
local i = 3
while ARGV[i] do
  local lim = {d = tonumber(ARGV[i]), a = tonumber(ARGV[i + 1]), p = tonumber(ARGV[i + 2]), b = tonumber(ARGV[i + 3])}
  local owed = units_us(lim, lim.b) - units_us(lim, math.min(remaining, lim.b))
  if reset >= 0 then owed = math.min(owed, reset) end
  local current = tonumber(redis.call('HGET', KEYS[1], field(lim)) or '0')
  if now + owed > current then
    redis.call('HSET', KEYS[1], field(lim), now + owed)
  end
  needed = math.max(needed, owed)
  i = i + 4
end
keep_alive(KEYS[1], needed)
return 1
