-- sent: a request admitted through a scope went to the provider ARGV[1] microseconds ago;
-- every listed bucket (its guarded ones) is full no sooner than the request's step after
-- that instant (sluice_quota::bucket::sent). Never loosens a bucket.
-- KEYS[1] the group's state hash
-- ARGV[1] since (µs), ARGV[2] the scope's field, ARGV[3] its layout, then per bucket: its
-- position (from 1) and the request's step on it (µs)
local now = now_us()
local at_wire = now - tonumber(ARGV[1])
local raw = call('HMGET', KEYS[1], '@x', ARGV[2])
local s = scope_state(raw[2], tonumber(ARGV[3]))
local needed, changed = 0, false
local i = 4
while ARGV[i] do
  local at = 4 + tonumber(ARGV[i])
  local full = at_wire + tonumber(ARGV[i + 1])
  if full > (s[at] or 0) then
    s[at] = full
    changed = true
  end
  needed = max(needed, full - now)
  i = i + 2
end
write_buckets(KEYS[1], raw[1], ARGV[2], s, changed, now, needed)
return 1
