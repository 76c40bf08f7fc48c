-- hold: an operator's pause of a scope (ARGV[1] = 1) or its release (ARGV[1] = 0). A held
-- scope refuses every reservation (reserve.lua, kind 6) until released. While held the
-- hash must not expire: its expiry is pushed far out (keep_alive never shortens it), and
-- brought back on release to what its buckets, in-flight count and pause still need.
-- KEYS[1] scope hash
local FAR_MS = 10 * 365 * 86400 * 1000
if ARGV[1] == '1' then
  redis.call('HSET', KEYS[1], 'h', 1)
  redis.call('PEXPIRE', KEYS[1], FAR_MS)
  return 1
end
if redis.call('HDEL', KEYS[1], 'h') == 0 then
  return 0
end
local now = now_us()
local needed = 0
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if all[i] == 'n' then
    if tonumber(all[i + 1]) > 0 then needed = math.max(needed, 3600000000) end
  else
    needed = math.max(needed, (tonumber(all[i + 1]) or 0) - now)
  end
end
if #all > 0 then
  redis.call('PEXPIRE', KEYS[1], math.ceil(needed / 1000) + 60000)
end
return 1
