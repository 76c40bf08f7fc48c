-- sluice quota scripts, v6: shared functions. Times are microseconds of the Redis
-- server's own clock (TIME), never the gateway instances' clocks.
--
-- All scopes of a hash-tag group live in one hash (the group's state): one field per scope,
-- a MessagePack array {n, p, h, layout, tat_1, ..., tat_L}: requests in flight, paused
-- until, held by an operator (1 or 0), the layout of its limits (record.rs) and per limit
-- the instant that bucket is full again (a GCRA; 0 or missing means full), optionally
-- followed by a claim on one bucket {bucket, step, until, share, claimer} (batch.lua; 0 for none,
-- dropped when the layout changes); per scope with money budgets a field `<scope>$b`, a
-- MessagePack array {day's period, spent that day, month's period, spent that month,
-- held that day, held that month, restored} (periods by their start, Unix seconds; amounts
-- in micro-units: a new period starts from zero; held: by reservations in flight; restored:
-- 1 once brought up to the store of record, restore.lua); and `@x`, the
-- instant the hash's expiry was last pushed to, so the hot path never asks Redis for a TTL.
-- A batch of decisions (batch.lua) reads the fields it touches with one HMGET and writes
-- the ones it changed with one HSET.
--
-- Lua steps and strings crossing between Lua and Redis cost more than the commands a
-- decision runs, so the gateway does the arithmetic it can (record.rs: costs turned into
-- time, never-fits found) and packs numbers as MessagePack, unpacked here in one C call.

local call, tonumber, max, pack, unpack_mp = redis.call, tonumber, math.max, cmsgpack.pack, cmsgpack.unpack

local function now_us()
  local t = call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- The limits a layout spells out (record.rs `layout_of`: 2^50 plus one base-32 digit per
-- limit, naming its dimension and period, first limit lowest), or nil for an opaque one.
local SPELLED = 2 ^ 50
local function spelled(layout)
  if not layout or layout < SPELLED then
    return nil
  end
  local digits, x = {}, layout - SPELLED
  while x > 0 do
    digits[#digits + 1] = x % 32
    x = math.floor(x / 32)
  end
  return digits
end

-- Where each limit of layout `from` sits in layout `to` (position -> position; a limit
-- gone has none), matched by the dimension and period it limits; nil when either layout is
-- opaque. Also returns `to`'s limits (nil when opaque).
local function positions(from, to)
  local was, is = spelled(from), spelled(to)
  if not (was and is) then
    return nil, is
  end
  local at = {}
  for p, digit in ipairs(was) do
    for q, other in ipairs(is) do
      if other == digit then
        at[p] = q
        break
      end
    end
  end
  return at, is
end

-- State `s` of another layout carried over to `layout` (a reload, or an instance that has
-- not reloaded yet, changed which limits the scope has): the in-flight count, pause and
-- hold stay; each bucket keeps the instant of the old bucket that limits the same
-- dimension over the same period, and a bucket new to the scope starts full (0). Buckets
-- of an opaque layout start full.
local function relayout(s, layout)
  local out = {s[1], s[2], s[3], layout}
  local at, limits = positions(s[4], layout)
  if limits then
    for q = 1, #limits do
      out[4 + q] = 0
    end
    for p, q in pairs(at or {}) do
      out[4 + q] = s[4 + p] or 0
    end
  end
  return out
end

-- A scope's state from its packed field (false when absent: a fresh scope) for limits of
-- `layout` (nil: whatever layout it has), carried over when it has another.
local function scope_state(raw, layout)
  if not raw then
    return {0, 0, 0, layout}
  end
  local s = unpack_mp(raw)
  if layout and s[4] ~= layout then
    return relayout(s, layout)
  end
  return s
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

-- Writes scope field `sid`'s state `s`, some of whose buckets were set by position, when
-- `changed`, keeping the state hash (whose `@x` is `x`) alive `needed_us` more. Positions
-- below the ones set stay dense: a bucket never written is full (0).
local function write_buckets(state, x, sid, s, changed, now, needed_us)
  for at = 5, #s do
    s[at] = s[at] or 0
  end
  if changed then
    local writes = {sid, pack(s)}
    write_state(state, writes, expiry(x, now, needed_us, writes, 2))
  end
end

-- Time worth of n units of a limit {a = amount, p = period µs}, rounded up.
local function units_us(lim, n)
  return math.ceil(n * lim.p / lim.a)
end
