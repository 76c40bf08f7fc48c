-- peek: a scope's state for a snapshot, on the server's clock.
-- KEYS[1] the group's state hash, ARGV[1] the scope's field, from ARGV[2] its buckets' codes
-- Returns {now (µs), requests in flight, held (1 or 0), then each bucket's full-again
-- instant (µs, 0 for full)}.
local s = scope_state(call('HGET', KEYS[1], ARGV[1]))
local reply = {now_us(), s.n or 0, s.h and 1 or 0}
for i = 2, #ARGV do
  reply[#reply + 1] = s[ARGV[i]] or 0
end
return reply
