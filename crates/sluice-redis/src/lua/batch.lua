-- batch: reservations and settlements of one group, in the order given. Each is all or
-- nothing and decided exactly as if it ran alone at that point of the order; the batch
-- only shares the work around them: one TIME, one HMGET of every field the batch touches,
-- one HSET of the fields it changed, one ZADD of the new leases.
-- KEYS[1] leases zset, KEYS[2] the group's state hash; from KEYS[3] pairs of a deployment's
-- fairness hash and its set of tenants asking (refused lately, scored by expiry, µs).
-- ARGV[1] most expired leases to settle first, ARGV[2] the number F of fields the batch
-- names, ARGV[3 .. 2 + F] those fields (scopes of the group), then the operations:
--   reserve: 'r', the lease member (record.rs `lease_member`) and a MessagePack array of
--     the lease (µs), fairness pair (0 for none, n for KEYS[2n + 1] and KEYS[2n + 2]),
--     weight, this request's tokens, the slack (tokens), tenant, 1 when more of the
--     tenant's requests are queued behind this one (admitted, it still asks) or 0, which
--     scopes are the caller's own (bit k - 1 for the k-th: their refusals do not make the
--     tenant ask), the scope count S, the S scopes' field numbers (from 1), the scopes
--     (record.rs `reserve_spec`), which scopes' state a grant returns (bit k - 1, 0 for
--     none), the caller's share of shared bursts (thousandths: whom its claims hold back),
--     the money budgets it checks and charges (record.rs `budget_reserve`), how much
--     longer (µs) the caller waits for it (its claims lapse then; none past it) and who the
--     caller is (its claims carry it, so withdraw.lua can drop them; none or 0: nobody);
--   settle: 's', the lease member and a MessagePack array of the count S of scopes it
--     touches, their S field numbers, the settlement (record.rs `settle_spec`), the money
--     budgets it moves (record.rs `budget_settle`);
--   a run of k reservations on the same scopes, without fair share: 'g', k, their
--     combined spec as a reserve's array (record.rs `ReserveSpec::combined`: if it
--     passes, each of them passes in turn), then each one's member and array. When the
--     combined one does not pass, each is decided on its own, in order;
--   the first of k reservations that passes (a pool's request on its members): 'f', k,
--     then each one's member and array as for 'r'. They are tried in order, each decided
--     as a reservation alone, until one is granted; the others are not made. What a
--     refusal records for the waiting request (its claims on idle windows, its tenant
--     asking for a fair share) is recorded only when none passes, once all were decided:
--     a request granted on one member waits on no other, and is never held back by a
--     claim of its own.
-- Returns one reply per reservation and settlement. Reserve: granted, {1}, or with scopes to
-- report {1, now (µs), then per reported scope its requests in flight and each bucket's
-- full-again instant (µs), as they are right after the grant} (the gateway's rate-limit
-- headers, without another read; a run granted at once shares the state after the whole
-- run; a reservation granted before answers just {1}); or refused, {0, wait_us, scope
-- index, limit index, kind} with kind 1 = not yet, 2 = slots busy, 4 = paused, 5 = fair
-- share, 6 = held by an operator, 7 = a money budget spent until the next period, 8 = a
-- money budget that reservations in flight hold (it fits once they settle), 9 = a money
-- budget not yet restored from the store of record (3, never fits, the gateway finds
-- before asking; for 5 it names the scope; for 7, 8 and 9 the limit index is the budget's
-- slot).
-- First: granted, {1, the index (from 1) of the one granted, then its reply after the 1};
-- or {0, then each one's refusal as wait_us, scope index, limit index, kind, in order},
-- stopping after a kind 9 (what follows is not tried; nothing is recorded: the gateway
-- restores and asks again).
-- Settle: {1}, or {0} when the reservation is unknown (settled before, or expired).
local A = ARGV
local leases, state = KEYS[1], KEYS[2]
local F = tonumber(A[2])
local raw = call('HMGET', state, '@x', unpack(A, 3, 2 + F))
local now = now_us()

-- Scope states of this batch by field: false for a fresh scope; changed ones are written
-- once at the end.
local fields, cache, changed, needed = {}, {}, {}, 0
for k = 1, F do
  local f, r = A[2 + k], raw[k + 1]
  fields[k] = f
  cache[f] = r and unpack_mp(r) or false
end
local function get(f)
  local s = cache[f]
  if s == nil then
    local r = call('HGET', state, f)
    s = r and unpack_mp(r) or false
    cache[f] = s
  end
  return s
end
local function put(f, s)
  if not changed[f] then
    changed[f] = true
    changed[#changed + 1] = f
  end
  cache[f] = s
end

-- Applies a settlement (record.rs `settle_spec`) to n scopes, the fields
-- list[first .. first + n - 1] (or, with `by`, the fields of those numbers): per scope 1 or
-- 0 (a concurrency slot back or not), its layout and a bucket count, then per bucket its
-- position and the time to add (or, negative, give back; never before now: a bucket holds
-- at most its burst). When the scope's limits changed since, each move goes to the bucket
-- that limits the same dimension over the same period (none: dropped); with an opaque
-- layout the buckets are left alone.
local function settle(list, first, n, spec, by)
  local c = 1
  for k = first, first + n - 1 do
    local f = list[k]
    if by then f = by[f] end
    local s = get(f) or {0, 0, 0}
    if spec[c] == 1 then
      local inflight = s[1] - 1
      if inflight < 0 then inflight = 0 end
      s[1] = inflight
    end
    local m = spec[c + 2]
    -- Positions of the settlement's layout in the state's: the same (false), each bucket
    -- by what it limits (the scope's limits changed since the reservation), or nil when a
    -- layout is opaque.
    local to = false
    if s[4] ~= spec[c + 1] then
      to = positions(spec[c + 1], s[4])
    end
    c = c + 3
    if to ~= nil then
      for _ = 1, m do
        local p, delta = spec[c], spec[c + 1]
        if to then p = to[p] end
        local at = 4 + (p or 0)
        local new = p and s[at] or 0
        if delta >= 0 then
          if new < now then new = now end
          new = new + delta
        else
          new = new + delta
          if new < now then new = now end
        end
        if p then
          s[at] = new
          if new - now > needed then needed = new - now end
        end
        c = c + 2
      end
    else
      c = c + 2 * m
    end
    put(f, s)
  end
end

-- Settles budgets (record.rs `budget_settle`: field, slot, period, amount to add to the
-- spend, amount no longer held) charged in a period still current; a past period's are
-- left alone. Never below zero; what is held never above what is spent. A field written
-- before holds were kept (four numbers) holds nothing.
local function settle_budgets(budgets)
  for i = 1, #budgets, 5 do
    local bs, slot = get(budgets[i]), budgets[i + 1]
    if bs and bs[2 * slot - 1] == budgets[i + 2] then
      local spent = max(0, bs[2 * slot] + budgets[i + 3])
      bs[5], bs[6] = bs[5] or 0, bs[6] or 0
      bs[2 * slot], bs[4 + slot] = spent, math.min(spent, max(0, bs[4 + slot] - budgets[i + 4]))
      put(budgets[i], bs)
    end
  end
end

-- Reservations whose lease ran out are settled first, by the settlement each lease member
-- carries for that case (id, fields, spec, and the budgets it no longer holds).
local expired = call('ZRANGEBYSCORE', leases, '-inf', now, 'LIMIT', 0, tonumber(A[1]))
if #expired > 0 then
  for _, member in ipairs(expired) do
    local m = unpack_mp(member)
    settle(m[2], 1, #m[2], m[3])
    settle_budgets(m[4] or {})
  end
  call('ZREM', leases, unpack(expired))
end

-- Leases granted by this batch, added at the end (member -> expiry; order kept).
local added, added_order = {}, {}

-- A tenant refused while asking for a fair share: it counts as asking for a second.
local function asked(asking, tenant, reply)
  call('ZADD', asking, now + 1000000, tenant)
  call('ZREMRANGEBYSCORE', asking, '-inf', now)
  call('PEXPIRE', asking, 60000)
  return reply
end

-- Whether a reservation is known already (granted before: the same answer again).
local function known(member)
  return added[member] or call('ZSCORE', leases, member)
end

local function grant(member, lease)
  added[member] = now + lease
  added_order[#added_order + 1] = member
end

-- Claims (bucket.rs `Claim`): a scope's state may carry, after its nl buckets, the bucket a
-- larger cost waits to find idle, that cost's step, when the claim lapses (µs; 0 for none),
-- the claimer's share and the claimer (withdraw.lua). Returns the first four while the
-- claim holds, else 0, 0, 0, 0. A claim lapses CLAIM_GRACE after the instant its claimer
-- could pass (bucket.rs `CLAIM_GRACE`), or when its claimer stops waiting, if sooner; a
-- claimer gone by then claims nothing.
local CLAIM_GRACE = 250000
local function claim_of(s, nl, now)
  local cj = s and s[5 + nl]
  if not cj or cj == 0 or s[7 + nl] <= now then
    return 0, 0, 0, 0
  end
  return cj, s[6 + nl], s[7 + nl], s[8 + nl] or 1000
end

-- Records the claims {scope index, bucket, step, until, nl} of a refusal by buckets that
-- need an idle window alone, for a caller of `share`: each replaces a lapsed or no larger
-- claim on its scope.
local function record_claims(o, st, claims, share, claimer)
  for _, cl in ipairs(claims) do
    local k, nl = cl[1], cl[5]
    local s = st[k]
    local _, held = claim_of(s, nl, now)
    if s and held <= cl[3] then
      for j = 1, nl do
        s[4 + j] = s[4 + j] or 0
      end
      s[5 + nl], s[6 + nl], s[7 + nl], s[8 + nl], s[9 + nl] = cl[2], cl[3], cl[4], share, claimer
      if cl[4] - now > needed then needed = cl[4] - now end
      put(fields[o[9 + k]], s)
    end
  end
end

-- A grant drops its scope's claim when it lapsed or the grant's step on the claimed bucket
-- (the spec's pairs from `at`) is at least the claimer's: the claimer itself passed, or one
-- as large took the idle window first.
local function drop_claim_passed(s, nl, spec, at)
  local cj = s[5 + nl]
  if cj and cj > 0 and (s[7 + nl] <= now or spec[at + 2 * (cj - 1)] >= s[6 + nl]) then
    s[5 + nl], s[6 + nl], s[7 + nl], s[8 + nl], s[9 + nl] = 0, 0, 0, 0, 0
  end
end

-- Money budgets (record.rs `budget_reserve`): per budget its field, slot (1 the day, 2
-- the month), current period, amount, this cost, the time to the next period (µs) and the
-- scope's index. The refusal of the first that cannot take the cost in its period even
-- once what reservations in flight hold is settled (kind 7), else of the first that takes
-- it only then (kind 8), or nil. When the gateway keeps a store of record (`recorded`), a
-- budget not yet restored from it refuses first (kind 9: the gateway restores it and asks
-- again).
local function over_budget(budgets, recorded)
  local held_by
  for i = 1, #budgets, 7 do
    local bs, slot = get(budgets[i]), budgets[i + 1]
    if recorded and not (bs and bs[7] == 1) then
      return {0, 0, budgets[i + 6], slot, 9}
    end
    local spent, held = 0, 0
    -- A record of a later period than the caller's is the current one: a caller whose
    -- clock is behind never starts its period again.
    if bs and bs[2 * slot - 1] >= budgets[i + 2] then
      spent = bs[2 * slot]
      held = math.min(spent, bs[4 + slot] or 0)
    end
    if spent + budgets[i + 4] > budgets[i + 3] then
      if spent - held + budgets[i + 4] > budgets[i + 3] then
        return {0, budgets[i + 5], budgets[i + 6], slot, 7}
      end
      held_by = held_by or {0, 0, budgets[i + 6], slot, 8}
    end
  end
  return held_by
end

-- Charges each budget its cost in its current period, spent and held until it settles (a
-- later period starts from zero, an earlier one is charged to the period kept); the state
-- lives until the period ends.
local function charge_budgets(budgets)
  for i = 1, #budgets, 7 do
    local f, slot, period = budgets[i], budgets[i + 1], budgets[i + 2]
    local bs = get(f) or {0, 0, 0, 0}
    bs[5], bs[6] = bs[5] or 0, bs[6] or 0
    -- Only a later period starts from zero; the period kept never goes back.
    if bs[2 * slot - 1] < period then
      bs[2 * slot - 1], bs[2 * slot], bs[4 + slot] = period, 0, 0
    end
    bs[2 * slot] = bs[2 * slot] + budgets[i + 4]
    bs[4 + slot] = bs[4 + slot] + budgets[i + 4]
    if budgets[i + 5] > needed then needed = budgets[i + 5] end
    put(f, bs)
  end
end

-- Runs `effect` now, or, with `later` (a list), appends it there for the caller to run.
local function now_or_later(later, effect)
  if later then
    later[#later + 1] = effect
  else
    effect()
  end
end

-- Decides the reservation(s) `o` describes, n of them at once: the refusal, or nil and the
-- grant's reply when granted (and taken). With `later`, what a refusal records is appended
-- there rather than recorded (see 'f').
local function reserve(o, n, later)
  local lease, pair, own, S = o[1], o[2], o[8], o[9]
  local spec, report, share = o[10 + S], o[11 + S], o[12 + S] or 1000
  local budgets = o[13 + S] or {}
  local patience = o[14 + S]
  local recorded = o[16 + S] == 1

  -- Held scopes refuse first, before the fair-share check: a held tenant must not count as
  -- asking (it would hold every other tenant back to its own virtual time).
  local st = {}
  local c = 1
  for k = 1, S do
    local s = get(fields[o[9 + k]])
    if s and s[3] == 1 then
      return {0, 0, k, 0, 6}
    end
    -- A scope whose limits changed since its state was written: carried over.
    if s and s[4] ~= spec[c + 1] then
      s = relayout(s, spec[c + 1])
    end
    st[k] = s
    c = c + 3 + 2 * spec[c + 2]
  end

  -- A spent budget refuses at once: its wait is the next period, not capacity (or, held by
  -- reservations in flight, their settlement).
  local spent = over_budget(budgets, recorded)
  if spent then return spent end

  -- Fair share: a tenant too far ahead of the slowest tenant asking is held back briefly.
  local tenant, fair, asking, fair_time, fair_slowest, fair_fields, was_asking
  -- A refusal while asking for a fair share: the tenant counts as asking.
  local function waits(reply)
    now_or_later(later, function() asked(asking, tenant, nil) end)
    return reply
  end
  if pair > 0 then
    fair, asking = KEYS[2 * pair + 1], KEYS[2 * pair + 2]
    local weight, fcost, slack = o[3], o[4], o[5]
    tenant = o[6]
    local others = call('ZRANGEBYSCORE', asking, string.format('(%.0f', now), '+inf')
    local fnames = {'@clock', '@x', 't:' .. tenant}
    for _, t in ipairs(others) do
      fnames[#fnames + 1] = 't:' .. t
      if t == tenant then was_asking = true end
    end
    fair_fields = call('HMGET', fair, unpack(fnames))
    local clock = tonumber(fair_fields[1] or '0')
    local mine = max(tonumber(fair_fields[3] or '0'), clock)
    local slowest = mine
    for k = 4, #fnames do
      slowest = math.min(slowest, max(tonumber(fair_fields[k] or '0'), clock))
    end
    if mine > slowest + slack / weight then
      -- The gateway names the deployment scope in its refusal.
      return waits({0, 50000, 0, 0, 5})
    end
    -- The new floor of virtual times: no tenant lags more than the slack behind this one,
    -- whether it is waiting right now or was just admitted between two refusals.
    fair_time, fair_slowest = mine + fcost / weight, math.min(slowest, mine - slack / weight)
  end

  -- Decide: pauses, slots, then every bucket (a fresh scope's is full); each bucket's
  -- instant after this cost is kept for the grant. A bucket claimed by a larger cost
  -- waiting for an idle window (bucket.rs `Claim`) holds a smaller one back; a refusal only
  -- by buckets this cost needs idle records its own claims.
  local worst, wscope, wlim, wkind = 0, 0, 0, 0
  local after, b = {}, 0
  local idle_only, claims = true, {}
  c = 1
  for k = 1, S do
    local s = st[k]
    local cc, nl = spec[c], spec[c + 2]
    c = c + 3
    if s and s[2] - now > 0 then
      idle_only = false
      if s[2] - now > worst then
        worst, wscope, wlim, wkind = s[2] - now, k, 0, 4
      end
    end
    if cc > 0 and (s and s[1] or 0) + n > cc then
      -- A refusal by a shared scope means the tenant waits for the shared capacity.
      if pair > 0 and bit.band(own, 2 ^ (k - 1)) == 0 then return waits({0, 0, k, 0, 2}) end
      return {0, 0, k, 0, 2}
    end
    local cj, cstep, cuntil, cshare = claim_of(s, nl, now)
    -- A run of several at once is never decided across a claim (each goes alone). A claim
    -- holds back only callers with at most the claimer's share (its class or lower).
    if cj > 0 and n > 1 then return {0, 1, k, cj, 1} end
    for j = 1, nl do
      local tat = s and s[4 + j] or 0
      local base = tat
      if base < now then base = now end
      local step, room = spec[c], spec[c + 1]
      -- The state may be at most `room` ahead of now (bucket.rs `Need::earliest`): the bucket
      -- keeps that much after this cost, or, negative, has been full for that long. A fresh
      -- bucket (0) has been full for ever.
      local wait = tat - room - now
      if cj == j and step < cstep and share <= cshare then
        -- Behind the claimer: until it has passed (when the bucket is idle) and taken its
        -- step, or the claim lapses.
        local behind = base + cstep - room
        if behind > cuntil then behind = cuntil end
        wait, idle_only = behind - now, false
      elseif wait > 0 and room <= 0 and (not patience or patience >= wait) then
        local lapse = now + wait + CLAIM_GRACE
        if patience and now + patience < lapse then lapse = now + patience end
        claims[#claims + 1] = {k, j, step, lapse, nl}
      elseif wait > 0 then
        idle_only = false
      end
      if wait > worst then
        worst, wscope, wlim, wkind = wait, k, j, 1
      end
      b = b + 1
      after[b] = base + step
      c = c + 2
    end
  end
  if worst > 0 then
    if idle_only and n == 1 then
      now_or_later(later, function() record_claims(o, st, claims, share, o[15 + S] or 0) end)
    end
    local reply = {0, math.ceil(worst), wscope, wlim, wkind}
    if pair > 0 and bit.band(own, 2 ^ (wscope - 1)) == 0 then return waits(reply) end
    return reply
  end

  -- Granted: take a slot and the cost of every bucket. Scopes with neither limits nor a
  -- concurrency cap never change and are not written.
  if lease > needed then needed = lease end
  local granted, g = {1}, 1
  if report > 0 then granted[2], g = now, 2 end
  c, b = 1, 0
  for k = 1, S do
    local s = st[k]
    local cc, layout, nl = spec[c], spec[c + 1], spec[c + 2]
    local told = report > 0 and bit.band(report, 2 ^ (k - 1)) ~= 0
    c = c + 3 + 2 * nl
    if cc == 0 and nl == 0 then
      if told then
        g = g + 1
        granted[g] = s and s[1] or 0
      end
    else
      if not s then
        s = {0, 0, 0, layout}
      end
      if s[2] - now > needed then needed = s[2] - now end
      if cc > 0 then s[1] = s[1] + n end
      drop_claim_passed(s, nl, spec, c - 2 * nl)
      if told then
        g = g + 1
        granted[g] = s[1]
      end
      for j = 1, nl do
        local new = after[b + j]
        s[4 + j] = new
        if told then granted[g + j] = new end
        if new - now > needed then needed = new - now end
      end
      if told then g = g + nl end
      b = b + nl
      put(fields[o[9 + k]], s)
    end
  end

  charge_budgets(budgets)

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
    if o[7] == 1 then
      -- More of this tenant waits behind this request: it still asks.
      asked(asking, tenant, nil)
    elseif was_asking then
      call('ZREM', asking, tenant)
    end
  end
  return nil, granted
end

local function reserve_op(member, blob)
  if known(member) then
    return {1}
  end
  local o = unpack_mp(blob)
  local refusal, granted = reserve(o, 1)
  if refusal then
    return refusal
  end
  grant(member, o[1])
  return granted
end

local function settle_op(at)
  local member = A[at + 1]
  if added[member] then
    added[member] = false
  elseif call('ZREM', leases, member) == 0 then
    return {0}
  end
  local o = unpack_mp(A[at + 2])
  local S = o[1]
  settle(o, 2, S, o[2 + S], fields)
  settle_budgets(o[3 + S] or {})
  return {1}
end

-- The first of k reservations ('f' at `at`) that passes.
local function first_op(at, k)
  local later, refusals = {}, {0}
  for i = 1, k do
    local member = A[at + 2 * i]
    local granted
    if known(member) then
      granted = {1}
    else
      local o = unpack_mp(A[at + 2 * i + 1])
      local refusal
      refusal, granted = reserve(o, 1, later)
      if refusal then
        for j = 2, 5 do
          refusals[#refusals + 1] = refusal[j]
        end
        if refusal[5] == 9 then
          return refusals
        end
      else
        grant(member, o[1])
      end
    end
    if granted then
      table.insert(granted, 2, i)
      return granted
    end
  end
  for _, effect in ipairs(later) do
    effect()
  end
  return refusals
end

local replies = {}
local at = 3 + F
while A[at] do
  local kind = A[at]
  if kind == 'r' then
    replies[#replies + 1] = reserve_op(A[at + 1], A[at + 2])
    at = at + 3
  elseif kind == 's' then
    replies[#replies + 1] = settle_op(at)
    at = at + 3
  elseif kind == 'f' then
    local k = tonumber(A[at + 1])
    replies[#replies + 1] = first_op(at, k)
    at = at + 2 + 2 * k
  else
    local k = tonumber(A[at + 1])
    local first, fresh = at + 3, true
    for i = 0, k - 1 do
      if known(A[first + 2 * i]) then fresh = false end
    end
    local combined = unpack_mp(A[at + 2])
    local refusal, granted
    if fresh then refusal, granted = reserve(combined, k) end
    if granted then
      for i = 0, k - 1 do
        grant(A[first + 2 * i], combined[1])
        replies[#replies + 1] = granted
      end
    else
      for i = 0, k - 1 do
        replies[#replies + 1] = reserve_op(A[first + 2 * i], A[first + 2 * i + 1])
      end
    end
    at = first + 2 * k
  end
end

if #changed > 0 then
  local writes = {}
  for k, f in ipairs(changed) do
    writes[2 * k - 1] = f
    writes[2 * k] = pack(cache[f])
  end
  write_state(state, writes, expiry(raw[1], now, needed, writes, 2 * #changed))
end
local zadd = {}
for _, member in ipairs(added_order) do
  local until_us = added[member]
  if until_us then
    zadd[#zadd + 1] = until_us
    zadd[#zadd + 1] = member
  end
end
if #zadd > 0 then
  call('ZADD', leases, unpack(zadd))
end
return replies
