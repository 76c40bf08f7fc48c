-- reserve: all scopes of this part of the path, every limit, the concurrency slots,
-- all or nothing. Idempotent on the reservation (its lease member).
-- KEYS[1] leases zset, KEYS[2] the group's state hash; with a tenant, KEYS[3] the
-- deployment's fairness hash and KEYS[4] its set of tenants asking (refused lately, scored
-- by expiry, µs): a tenant too far ahead of the slowest one asking is held back briefly.
-- ARGV[1] the lease member (record.rs `lease_member`), ARGV[2] lease (µs), ARGV[3] most
-- expired leases to settle first, ARGV[4] tenant for the fair-share check ('' for none),
-- ARGV[5] its weight, ARGV[6] this request's tokens, ARGV[7] the slack (tokens), ARGV[8]
-- the scopes (record.rs `reserve_spec`, flat: per scope its concurrency cap, layout and
-- limit count, then per limit the cost as time and the room the bucket must keep after it,
-- as time), from ARGV[9] the scopes' fields.
-- Returns {1} on success, or {0, wait_us, scope index, limit index, kind}
-- with kind 1 = not yet, 2 = slots busy, 4 = paused, 5 = fair share, 6 = held by an
-- operator (3, never fits, the gateway finds before asking; for 5 it names the scope).
local A = ARGV
local now = now_us()
local leases, state, member = KEYS[1], KEYS[2], A[1]
expire_leases(leases, state, now, tonumber(A[3]))
if call('ZSCORE', leases, member) then
  return {1}
end
local S = #A - 8
local raw = call('HMGET', state, '@x', unpack(A, 9, 8 + S))
local spec = unpack_mp(A[8])
local lease = tonumber(A[2])

-- Held scopes refuse first, before the fair-share check: a held tenant must not count as
-- asking (it would hold every other tenant back to its own virtual time).
local st = {}
local c = 1
for k = 1, S do
  local s = scope_state(raw[k + 1], spec[c + 1])
  if s[3] == 1 then
    return {0, 0, k, 0, 6}
  end
  st[k] = s
  c = c + 3 + 2 * spec[c + 2]
end

-- Fair share: a tenant too far ahead of the slowest tenant asking is held back briefly.
local tenant = A[4]
local fair, asking = KEYS[3], KEYS[4]
local fair_time, fair_slowest, fair_fields, was_asking
local function refused(reply)
  if tenant ~= '' then
    call('ZADD', asking, now + 1000000, tenant)
    call('ZREMRANGEBYSCORE', asking, '-inf', now)
    call('PEXPIRE', asking, 60000)
  end
  return reply
end
if tenant ~= '' then
  local weight, fcost, slack = tonumber(A[5]), tonumber(A[6]), tonumber(A[7])
  local others = call('ZRANGEBYSCORE', asking, string.format('(%.0f', now), '+inf')
  local names = {'@clock', '@x', 't:' .. tenant}
  for _, t in ipairs(others) do
    names[#names + 1] = 't:' .. t
    if t == tenant then was_asking = true end
  end
  fair_fields = call('HMGET', fair, unpack(names))
  local clock = tonumber(fair_fields[1] or '0')
  local mine = math.max(tonumber(fair_fields[3] or '0'), clock)
  local slowest = mine
  for k = 4, #names do
    slowest = math.min(slowest, math.max(tonumber(fair_fields[k] or '0'), clock))
  end
  if mine > slowest + slack / weight then
    -- The gateway names the deployment scope in its refusal.
    return refused({0, 50000, 0, 0, 5})
  end
  -- The new floor of virtual times: no tenant lags more than the slack behind this one,
  -- whether it is waiting right now or was just admitted between two refusals.
  fair_time, fair_slowest = mine + fcost / weight, math.min(slowest, mine - slack / weight)
end

local worst, wscope, wlim, wkind = 0, 0, 0, 0
local needed = lease
c = 1
for k = 1, S do
  local s = st[k]
  local paused = s[2] - now
  if paused > worst then
    worst, wscope, wlim, wkind = paused, k, 0, 4
  end
  if paused > needed then needed = paused end
  local cc, nl = spec[c], spec[c + 2]
  if cc > 0 then
    if s[1] >= cc then
      return refused({0, 0, k, 0, 2})
    end
    s[1] = s[1] + 1
  end
  c = c + 3
  for j = 1, nl do
    local base = s[4 + j] or 0
    if base < now then base = now end
    -- The bucket must keep `room` (burst less cost) after this cost.
    local wait = base - spec[c + 1] - now
    if wait > 0 then
      if wait > worst then
        worst, wscope, wlim, wkind = wait, k, j, 1
      end
    else
      local new = base + spec[c]
      s[4 + j] = new
      if new - now > needed then needed = new - now end
    end
    c = c + 2
  end
end
if worst > 0 then
  return refused({0, math.ceil(worst), wscope, wlim, wkind})
end
-- Scopes with neither limits nor a concurrency cap never change: not written.
local writes, n = {}, 0
c = 1
for k = 1, S do
  local cc, nl = spec[c], spec[c + 2]
  if cc > 0 or nl > 0 then
    writes[n + 1] = A[8 + k]
    writes[n + 2] = pack(st[k])
    n = n + 2
  end
  c = c + 3 + 2 * nl
end
if n > 0 then
  write_state(state, writes, expiry(raw[1], now, needed, writes, n))
end
if fair_time then
  local fw = {'t:' .. tenant, fair_time}
  if fair_slowest > tonumber(fair_fields[1] or '0') then
    fw[#fw + 1] = '@clock'
    fw[#fw + 1] = fair_slowest
  end
  -- The fairness hash lives an hour past the last admission; pushed once a minute at most.
  local x = tonumber(fair_fields[2] or '0')
  if x < now + 3540000000 then
    fw[#fw + 1] = '@x'
    fw[#fw + 1] = now + 3600000000
  end
  call('HSET', fair, unpack(fw))
  if x < now + 3540000000 then
    call('PEXPIRE', fair, 3600000)
  end
  if was_asking then
    call('ZREM', asking, tenant)
  end
end
call('ZADD', leases, now + lease, member)
return {1}
