-- renew: the holder of open reservations is alive; each lease of the given members still in
-- the lease set is pushed to now + the heartbeat lease (never shortened). A member gone
-- (settled, or expired and settled by a batch) is not added back: `XX`. A member whose
-- lease ran out but which no batch has settled yet still holds its capacity in the state,
-- so extending it keeps the set and the state in step. The state hash is kept alive as long
-- as the renewed leases need it.
-- KEYS[1] leases zset, KEYS[2] the group's state hash
-- ARGV[1] the heartbeat lease (µs), ARGV[2 ..] lease members (record.rs `lease_member`)
-- Returns how many leases were renewed.
local leases, state = KEYS[1], KEYS[2]
local lease = tonumber(ARGV[1])
local now = now_us()
local until_us = now + lease
local scores = call('ZMSCORE', leases, unpack(ARGV, 2))
local zadd, n = {}, 0
for i = 1, #scores do
  if scores[i] then
    zadd[#zadd + 1] = until_us
    zadd[#zadd + 1] = ARGV[i + 1]
    n = n + 1
  end
end
if n == 0 then
  return 0
end
call('ZADD', leases, 'XX', 'GT', unpack(zadd))
local x = call('HGET', state, '@x')
if x then
  local writes = {}
  local ms = expiry(x, now, lease, writes, 0)
  if ms then
    write_state(state, writes, ms)
  end
end
return n
