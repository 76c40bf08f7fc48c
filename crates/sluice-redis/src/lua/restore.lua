-- restore: brings money budgets up to what the store of record holds spent (the gateway's
-- `[ledger]`) and marks them restored; with a record kept, batch.lua refuses a budget not
-- so marked (kind 9) until this ran, so a Redis that lost its memory never admits against
-- a budget it forgot.
-- KEYS[1] the group's state hash; ARGV[1] how long the hash must live from now (µs: to the
-- month's end), then per budget: its field, the day's period, spent that day, the month's
-- period, spent that month (periods by their start, Unix seconds; micro-units).
-- A later period kept here is left alone; an earlier one is replaced. In the same period
-- the record holds what was settled, Redis also what reservations in flight hold: the
-- larger of Redis's amount and the record's plus what is held here stays (the record lags
-- what other instances settled by up to a write; what the record has and Redis lacks was
-- admitted elsewhere: before Redis lost its memory, or by a local fallback).
local now = now_us()
local fields = {}
for i = 2, #ARGV, 5 do
  fields[#fields + 1] = ARGV[i]
end
local raw = call('HMGET', KEYS[1], '@x', unpack(fields))
local writes = {}
for k, f in ipairs(fields) do
  local at = 2 + 5 * (k - 1)
  local bs = raw[k + 1] and unpack_mp(raw[k + 1]) or {0, 0, 0, 0}
  bs[5], bs[6] = bs[5] or 0, bs[6] or 0
  for slot = 1, 2 do
    local period, spent = tonumber(ARGV[at + 2 * slot - 1]), tonumber(ARGV[at + 2 * slot])
    if bs[2 * slot - 1] < period then
      bs[2 * slot - 1], bs[2 * slot], bs[4 + slot] = period, spent, 0
    elseif bs[2 * slot - 1] == period and bs[2 * slot] < spent + bs[4 + slot] then
      bs[2 * slot] = spent + bs[4 + slot]
    end
  end
  bs[7] = 1
  writes[#writes + 1] = f
  writes[#writes + 1] = pack(bs)
end
if #writes > 0 then
  write_state(KEYS[1], writes, expiry(raw[1], now, tonumber(ARGV[1]), writes, #writes))
end
return 1
