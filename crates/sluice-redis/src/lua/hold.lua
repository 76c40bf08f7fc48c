-- hold: an operator's pause of a scope (ARGV[1] = 1) or its release (ARGV[1] = 0). A held
-- scope refuses every reservation (reserve.lua, kind 6) until released. While any scope of
-- the group is held its state hash must not expire: its expiry is pushed far out, and
-- brought back on the last release to what its buckets, in-flight counts and pauses need.
-- KEYS[1] the group's state hash, ARGV[2] the scope's id
local FAR_US = 10 * 365 * 86400 * 1000000
local field = ARGV[2] .. '|h'
if ARGV[1] == '1' then
  local now = now_us()
  redis.call('HSET', KEYS[1], field, 1, '@x', now + FAR_US)
  redis.call('PEXPIRE', KEYS[1], FAR_US / 1000)
  return 1
end
if redis.call('HDEL', KEYS[1], field) == 0 then
  return 0
end
local now = now_us()
local needed = 0
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local name, value = all[i], all[i + 1]
  if string.sub(name, -2) == '|h' then
    return 1
  elseif string.sub(name, -2) == '|n' then
    if tonumber(value) > 0 then needed = math.max(needed, 3600000000) end
  elseif name ~= '@x' then
    needed = math.max(needed, (tonumber(value) or 0) - now)
  end
end
if #all > 0 then
  local until_us = now + needed + 600000000
  redis.call('HSET', KEYS[1], '@x', until_us)
  redis.call('PEXPIRE', KEYS[1], math.ceil((until_us - now) / 1000))
end
return 1
