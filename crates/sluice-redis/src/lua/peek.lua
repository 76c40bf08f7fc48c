-- peek: the state of one or more scopes of a group, for snapshots, on the server's clock.
-- KEYS[1] the group's state hash; ARGV[1] the number of scopes, then per scope its field,
-- its layout, its number of limits and whether it has money budgets (1 or 0).
-- Returns one array per scope: {now (µs), requests in flight, held (1 or 0), then each
-- bucket's full-again instant (µs, 0 for full), then, with budgets, its budget field
-- (batch.lua: day's period, spent that day, month's period, spent that month, held that
-- day, held that month; a field written before holds were kept holds nothing)}.
local now = now_us()
local replies = {}
for i = 1, tonumber(ARGV[1]) do
  local p = 2 + (i - 1) * 4
  local s = scope_state(call('HGET', KEYS[1], ARGV[p]), tonumber(ARGV[p + 1]))
  local reply = {now, s[1], s[3]}
  local nl = tonumber(ARGV[p + 2])
  for j = 1, nl do
    reply[3 + j] = s[4 + j] or 0
  end
  if ARGV[p + 3] == '1' then
    local raw = call('HGET', KEYS[1], ARGV[p] .. '$b')
    local b = raw and unpack_mp(raw) or {0, 0, 0, 0, 0, 0}
    for k = 1, 6 do
      reply[3 + nl + k] = b[k] or 0
    end
  end
  replies[i] = reply
end
return replies
