-- Shared by every job script. All keys live under one hash tag, {P:jobs}, so a script's
-- keys (declared or derived from the job prefix) are in one slot.
local SLOT = 17592186044416 -- 2^44: ready score = priority * 2^44 + seq

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function ready_score(job)
  local f = redis.call('HMGET', job, 'priority', 'seq')
  return tonumber(f[1]) * SLOT + tonumber(f[2])
end

-- Whether the job is running under lease `token`.
local function held(job, token)
  local f = redis.call('HMGET', job, 'state', 'lease')
  return f[1] == 'running' and f[2] == token
end

-- A finished job (and its idempotency key) is kept for `retention` ms.
local function retire(job, retention)
  redis.call('PEXPIRE', job, retention)
  local idem = redis.call('HGET', job, 'idem_key')
  if idem and idem ~= '' then
    redis.call('PEXPIRE', idem, retention)
  end
end
