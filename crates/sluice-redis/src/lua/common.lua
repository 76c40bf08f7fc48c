-- sluice quota scripts, v1: shared functions. Times are microseconds of the Redis
-- server's own clock (TIME), never the gateway instances' clocks. Bucket state is one
-- value per limit: the instant the bucket is full again (a GCRA), so a missing field or
-- an expired key means a full bucket.

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Time worth of n units of a limit, rounded up so pacing never runs fast.
local function units_us(lim, n)
  return math.ceil(n * lim.p / lim.a)
end

local function field(lim)
  return lim.d .. ':' .. lim.p
end

-- cost = {requests, input, output}; d = 1 requests, 2 input, 3 output, 4 total
local function cost_of(cost, d)
  if d == 1 then return cost[1] end
  if d == 2 then return cost[2] end
  if d == 3 then return cost[3] end
  return cost[2] + cost[3]
end

local function adjust(tat, now, lim, reserved, used)
  if used >= reserved then
    return math.max(tat, now) + units_us(lim, used - reserved)
  end
  return math.max(now, tat - units_us(lim, reserved - used))
end

-- Keeps a scope hash alive as long as it holds debt, a pause or a lease (+1 min); never
-- shortens it (another reservation's lease may need it longer).
local function keep_alive(key, needed_us)
  local ms = math.ceil(needed_us / 1000) + 60000
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end

-- Every limit field of a scope, then `n`, `p` and `h` (held by an operator), in one call.
local function read_scope(sc)
  local fields = {}
  for j, lim in ipairs(sc.l) do
    fields[j] = field(lim)
  end
  fields[#sc.l + 1] = 'n'
  fields[#sc.l + 2] = 'p'
  fields[#sc.l + 3] = 'h'
  return redis.call('HMGET', sc.k, unpack(fields))
end

-- Applies a settlement to every scope of a decoded reservation record.
local function settle_record(rec, now, used, upstream)
  for _, sc in ipairs(rec.s) do
    local u = used
    if sc.dep == 1 then u = upstream end
    local current = read_scope(sc)
    local writes = {}
    local needed = 0
    for j, lim in ipairs(sc.l) do
      local new = adjust(tonumber(current[j] or '0'), now, lim, cost_of(rec.c, lim.d), cost_of(u, lim.d))
      writes[#writes + 1] = field(lim)
      writes[#writes + 1] = new
      needed = math.max(needed, new - now)
    end
    if sc.cc > 0 then
      writes[#writes + 1] = 'n'
      writes[#writes + 1] = math.max(0, tonumber(current[#sc.l + 1] or '0') - 1)
    end
    if #writes > 0 then
      redis.call('HSET', sc.k, unpack(writes))
      keep_alive(sc.k, math.max(needed, tonumber(current[#sc.l + 2] or '0') - now))
    end
  end
end

-- Settles up to `max` reservations of this group whose lease ran out: own scopes keep
-- request and input but get output back; deployment scopes keep everything.
local function expire_leases(leases, prefix, now, max)
  local ids = redis.call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, max)
  for _, id in ipairs(ids) do
    local raw = redis.call('GET', prefix .. id)
    if raw then
      local rec = cjson.decode(raw)
      settle_record(rec, now, {rec.c[1], rec.c[2], 0}, rec.c)
      redis.call('DEL', prefix .. id)
    end
    redis.call('ZREM', leases, id)
  end
  return #ids
end
