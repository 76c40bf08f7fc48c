-- KEYS: the batch's marker, then the day hashes it adds to
-- ARGV: marker ttl (s), counter count N, then N counter names, then per day hash its
--       expiry (unix s), then per row: day index (1-based, into the day hashes), group,
--       and N values in the names' order
-- Adds a usage batch at most once: the marker is set first, and only a batch whose marker
-- was not there yet is added. Returns 1 when added, 0 when the batch had been added before.
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  return 0
end
local counters = tonumber(ARGV[2])
local days = #KEYS - 1
local names = 3
local expiries = names + counters
local at = expiries + days
while at <= #ARGV do
  local hash = KEYS[tonumber(ARGV[at]) + 1]
  local group = ARGV[at + 1]
  for i = 0, counters - 1 do
    local value = ARGV[at + 2 + i]
    if value ~= '0' then
      redis.call('HINCRBY', hash, ARGV[names + i] .. '|' .. group, value)
    end
  end
  at = at + 2 + counters
end
for i = 1, days do
  redis.call('EXPIREAT', KEYS[i + 1], ARGV[expiries + i - 1])
end
return 1
