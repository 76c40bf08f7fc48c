-- sluice quota scripts, v2: shared functions. Times are microseconds of the Redis
-- server's own clock (TIME), never the gateway instances' clocks.
--
-- All scopes of a hash-tag group live in one hash (the group's state), so a decision reads
-- every bucket of its part of the path with one HMGET and writes them with one HSET. A
-- bucket's field holds the instant it is full again (a GCRA; a missing field means a full
-- bucket); a scope's `|n` field its requests in flight, `|p` paused until, `|h` held by an
-- operator. `@x` is the instant the hash's expiry was last pushed to, so the hot path never
-- asks Redis for a TTL.
--
-- Lua steps cost far more than the commands a decision runs, so the gateway does the
-- arithmetic it can (record.rs: costs turned into time, fields named, never-fits found)
-- and sends fields together, for HMGET to take as they came.

local call, tonumber, max = redis.call, tonumber, math.max

local function now_us()
  local t = call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Keeps the state hash alive for `needed_us` more (+1 min): when that goes past the expiry
-- already set (`x`, read from the `@x` field), appends the new `@x` to `writes` (of `n`
-- entries) and returns the expiry to set (ms) once they are written, with ten minutes to
-- spare so most decisions leave it alone. Never shortens it; nil when nothing is to do.
local function expiry(x, now, needed_us, writes, n)
  if now + needed_us + 60000000 <= (tonumber(x) or 0) then
    return nil
  end
  local until_us = now + needed_us + 600000000
  writes[n + 1] = '@x'
  writes[n + 2] = until_us
  return math.ceil((until_us - now) / 1000)
end

-- Writes `writes` to the state hash and pushes its expiry out when `ms` says so.
local function write_state(state, writes, ms)
  call('HSET', state, unpack(writes))
  if ms then
    call('PEXPIRE', state, ms)
  end
end

-- Applies a settlement (record.rs `settle_args`) read from `v` at index `i`: the number of
-- in-flight fields to decrement (s), the number of buckets to move (m), the s + m fields,
-- then per bucket the time to add (or, negative, give back; never before now: a bucket
-- holds at most its burst).
local function settle_fields(state, v, i, now)
  local s, m = tonumber(v[i]), tonumber(v[i + 1])
  if s + m == 0 then
    return
  end
  local first = i + 2
  local h = call('HMGET', state, '@x', unpack(v, first, first + s + m - 1))
  local writes, n = {}, 0
  for k = 1, s do
    writes[n + 1] = v[first + k - 1]
    writes[n + 2] = max(0, (tonumber(h[k + 1]) or 0) - 1)
    n = n + 2
  end
  local needed = 0
  for k = s + 1, s + m do
    local tat, delta = tonumber(h[k + 1]) or 0, tonumber(v[first + m + k - 1])
    local new
    if delta >= 0 then
      new = max(tat, now) + delta
    else
      new = max(now, tat + delta)
    end
    writes[n + 1] = v[first + k - 1]
    writes[n + 2] = new
    n = n + 2
    needed = max(needed, new - now)
  end
  write_state(state, writes, expiry(h[1], now, needed, writes, n))
end

-- Settles up to `max` reservations of this group whose lease ran out, by the settlement
-- each lease member carries for that case (record.rs `lease_member`).
local function expire_leases(leases, state, now, most)
  local members = call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, most)
  for _, member in ipairs(members) do
    local v = {}
    for token in string.gmatch(member, '[^\31]+') do
      v[#v + 1] = token
    end
    settle_fields(state, v, 2, now)
    call('ZREM', leases, member)
  end
  return #members
end

-- Time worth of n units of a limit {a = amount, p = period µs}, rounded up.
local function units_us(lim, n)
  return math.ceil(n * lim.p / lim.a)
end
