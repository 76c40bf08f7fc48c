-- peek: a scope's state for a snapshot, on the server's clock.
-- KEYS[1] the group's state hash, ARGV[1] the scope's field, ARGV[2] its layout, ARGV[3]
-- its number of limits.
-- Returns {now (µs), requests in flight, held (1 or 0), then each bucket's full-again
-- instant (µs, 0 for full)}.
local s = scope_state(call('HGET', KEYS[1], ARGV[1]), tonumber(ARGV[2]))
local reply = {now_us(), s[1], s[3]}
for j = 1, tonumber(ARGV[3]) do
  reply[3 + j] = s[4 + j] or 0
end
return reply
