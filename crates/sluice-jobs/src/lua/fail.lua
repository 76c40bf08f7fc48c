-- KEYS: job, leases, delayed, dead_letter
-- ARGV: id, token, error, retry (0: never, 1: after delay), delay ms, counted (1|0), retention ms
-- Returns the new state, or '' when the lease is lost.
local job, id = KEYS[1], ARGV[1]
if not held(job, ARGV[2]) then
  return ''
end
redis.call('ZREM', KEYS[2], id)
redis.call('HSET', job, 'error', ARGV[3])
local f = redis.call('HMGET', job, 'attempts', 'max_attempts', 'seq')
local state
if ARGV[4] == '0' then
  state = 'failed'
  retire(job, tonumber(ARGV[7]))
elseif ARGV[6] == '1' and tonumber(f[1]) >= tonumber(f[2]) then
  state = 'dead_letter'
  redis.call('ZADD', KEYS[4], tonumber(f[3]), id)
else
  if ARGV[6] ~= '1' then
    redis.call('HINCRBY', job, 'attempts', -1)
  end
  local not_before = now_ms() + tonumber(ARGV[5])
  state = 'delayed'
  redis.call('HSET', job, 'not_before', not_before)
  redis.call('ZADD', KEYS[3], not_before, id)
end
redis.call('HSET', job, 'state', state)
return state
