-- hold: an operator's pause of a scope (ARGV[1] = 1) or its release (ARGV[1] = 0). A held
-- scope refuses every reservation (reserve.lua, kind 6) until released. While any scope of
-- the group is held its state hash must not expire: its expiry is pushed far out, and
-- brought back on the last release to what its buckets, in-flight counts and pauses need.
-- KEYS[1] the group's state hash, ARGV[2] the scope's field
local FAR_US = 10 * 365 * 86400 * 1000000
local now = now_us()
local s = scope_state(call('HGET', KEYS[1], ARGV[2]), nil)
if ARGV[1] == '1' then
  s[3] = 1
  call('HSET', KEYS[1], ARGV[2], pack(s), '@x', now + FAR_US)
  call('PEXPIRE', KEYS[1], FAR_US / 1000)
  return 1
end
if s[3] ~= 1 then
  return 0
end
s[3] = 0
call('HSET', KEYS[1], ARGV[2], pack(s))
local needed = 0
local all = call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if string.sub(all[i], -2) == '$b' then
    -- A scope's money budgets (batch.lua): kept until their month is over.
    needed = max(needed, 31 * 86400 * 1000000)
  elseif all[i] ~= '@x' then
    local other = unpack_mp(all[i + 1])
    if other[3] == 1 then
      return 1
    end
    if other[1] > 0 then needed = max(needed, 3600000000) end
    needed = max(needed, other[2] - now)
    for at = 5, #other do
      needed = max(needed, (other[at] or 0) - now)
    end
  end
end
local until_us = now + needed + 600000000
call('HSET', KEYS[1], '@x', until_us)
call('PEXPIRE', KEYS[1], math.ceil((until_us - now) / 1000))
return 1
