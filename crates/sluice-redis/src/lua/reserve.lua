-- reserve: all scopes of this part of the path, every limit, the concurrency slots,
-- all or nothing. Idempotent on the reservation id.
-- KEYS[1] leases zset, KEYS[2] record, KEYS[3..] scope hashes (the record's order)
-- ARGV[1] id, ARGV[2] lease (us), ARGV[3] record key prefix, ARGV[4] record (JSON),
-- ARGV[5] most expired leases to settle first, ARGV[6] the caller's share of shared
-- scopes' bursts, in thousandths (lower classes leave headroom for higher ones)
-- ARGV[7] tenant for the fair-share check ('' for none), ARGV[8] its weight, ARGV[9] this
-- request's tokens, ARGV[10] the slack (tokens); then KEYS[#scopes + 3] is the group's
-- fairness hash and KEYS[#scopes + 4] its set of tenants waiting (refused lately, scored by
-- expiry, us): a tenant too far ahead of the slowest waiting tenant is held back briefly.
-- Returns {1} on success, or {0, wait_us, scope index, limit index, kind}
-- with kind 1 = not yet, 2 = slots busy, 3 = never fits, 4 = paused, 5 = fair share,
-- 6 = held by an operator.
local now = now_us()
expire_leases(KEYS[1], ARGV[3], now, tonumber(ARGV[5]))
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {1}
end
local rec = cjson.decode(ARGV[4])
local lease = tonumber(ARGV[2])
local share = tonumber(ARGV[6] or '1000')
local worst, wscope, wlim, wkind = 0, 0, 0, 0
local news = {}
-- Held scopes refuse first, before the fair-share check: a held tenant must not count as
-- asking (it would hold every other tenant back to its own virtual time).
local current = {}
for i, sc in ipairs(rec.s) do
  current[i] = read_scope(sc)
  if current[i][#sc.l + 3] then
    return {0, 0, i, 0, 6}
  end
end
-- Fair share: a tenant too far ahead of the slowest tenant asking is held back briefly.
local fair_time, fair_slowest
local tenant = ARGV[7] or ''
local function refused(reply)
  if tenant ~= '' then
    local asking = KEYS[#rec.s + 4]
    redis.call('ZADD', asking, now + 1000000, tenant)
    redis.call('PEXPIRE', asking, 60000)
  end
  return reply
end
if tenant ~= '' then
  local fair, asking = KEYS[#rec.s + 3], KEYS[#rec.s + 4]
  local weight, fcost, slack = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  redis.call('ZREMRANGEBYSCORE', asking, '-inf', now)
  local clock = tonumber(redis.call('HGET', fair, '@clock') or '0')
  local function time_of(t)
    return math.max(tonumber(redis.call('HGET', fair, 't:' .. t) or '0'), clock)
  end
  local mine = time_of(tenant)
  local slowest = mine
  for _, t in ipairs(redis.call('ZRANGE', asking, 0, -1)) do
    slowest = math.min(slowest, time_of(t))
  end
  if mine > slowest + slack / weight then
    local dep = 1
    for i, sc in ipairs(rec.s) do
      if sc.dep == 1 then dep = i end
    end
    return refused({0, 50000, dep, 0, 5})
  end
  -- The new floor of virtual times: no tenant lags more than the slack behind this one,
  -- whether it is waiting right now or was just admitted between two refusals.
  fair_time, fair_slowest = mine + fcost / weight, math.min(slowest, mine - slack / weight)
end
for i, sc in ipairs(rec.s) do
  local h = current[i]
  local paused = tonumber(h[#sc.l + 2] or '0')
  if paused - now > worst then
    worst, wscope, wlim, wkind = paused - now, i, 0, 4
  end
  if sc.cc > 0 and tonumber(h[#sc.l + 1] or '0') >= sc.cc then
    return refused({0, 0, i, 0, 2})
  end
  news[i] = {}
  for j, lim in ipairs(sc.l) do
    local units = cost_of(rec.c, lim.d)
    if units > lim.a then
      return {0, 0, i, j, 3}
    end
    local base = math.max(tonumber(h[j] or '0'), now)
    local burst = units_us(lim, lim.b)
    if sc.sh == 1 then
      burst = math.floor(burst * share / 1000)
    end
    local cost = units_us(lim, units)
    local earliest = base - (burst - math.min(cost, burst))
    if earliest > now then
      if earliest - now > worst then
        worst, wscope, wlim, wkind = earliest - now, i, j, 1
      end
    else
      news[i][j] = base + cost
    end
  end
end
if worst > 0 then
  return refused({0, math.ceil(worst), wscope, wlim, wkind})
end
for i, sc in ipairs(rec.s) do
  local writes = {}
  local needed = lease
  for j, lim in ipairs(sc.l) do
    writes[#writes + 1] = field(lim)
    writes[#writes + 1] = news[i][j]
    needed = math.max(needed, news[i][j] - now)
  end
  if sc.cc > 0 then
    writes[#writes + 1] = 'n'
    writes[#writes + 1] = tonumber(current[i][#sc.l + 1] or '0') + 1
  end
  if #writes > 0 then
    redis.call('HSET', sc.k, unpack(writes))
  end
  keep_alive(sc.k, math.max(needed, tonumber(current[i][#sc.l + 2] or '0') - now))
end
if fair_time then
  local fair = KEYS[#rec.s + 3]
  redis.call('HSET', fair, 't:' .. tenant, fair_time)
  if fair_slowest > tonumber(redis.call('HGET', fair, '@clock') or '0') then
    redis.call('HSET', fair, '@clock', fair_slowest)
  end
  redis.call('PEXPIRE', fair, 3600000)
  redis.call('ZREM', KEYS[#rec.s + 4], tenant)
end
redis.call('SET', KEYS[2], ARGV[4])
redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
return {1}
