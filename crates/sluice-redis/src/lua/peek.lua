-- peek: the state of one or more scopes of a group, for snapshots, on the server's clock.
-- KEYS[1] the group's state hash; ARGV[1] the number of scopes, then per scope its field,
-- its layout and its number of limits.
-- Returns one array per scope: {now (µs), requests in flight, held (1 or 0), then each
-- bucket's full-again instant (µs, 0 for full)}.
local now = now_us()
local replies = {}
for i = 1, tonumber(ARGV[1]) do
  local p = 2 + (i - 1) * 3
  local s = scope_state(call('HGET', KEYS[1], ARGV[p]), tonumber(ARGV[p + 1]))
  local reply = {now, s[1], s[3]}
  for j = 1, tonumber(ARGV[p + 2]) do
    reply[3 + j] = s[4 + j] or 0
  end
  replies[i] = reply
end
return replies
