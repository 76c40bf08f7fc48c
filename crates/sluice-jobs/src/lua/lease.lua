-- KEYS: ready, delayed, leases, dead_letter
-- ARGV: job prefix, worker, visibility ms, batch, retention ms
-- Returns {recovered, recovered_dead} or {recovered, recovered_dead, id, token, HGETALL}.
local prefix, now, batch = ARGV[1], now_ms(), tonumber(ARGV[4])
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, batch)) do
  redis.call('ZREM', KEYS[2], id)
  local job = prefix .. id
  if redis.call('HGET', job, 'state') == 'delayed' then
    redis.call('HSET', job, 'state', 'queued')
    redis.call('ZADD', KEYS[1], ready_score(job), id)
  end
end
local recovered, dead = 0, 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, batch)) do
  redis.call('ZREM', KEYS[3], id)
  local job = prefix .. id
  local f = redis.call('HMGET', job, 'state', 'lease_until', 'attempts', 'max_attempts', 'seq')
  if f[1] == 'running' and tonumber(f[2]) <= now then
    recovered = recovered + 1
    redis.call('HINCRBY', job, 'reruns', 1)
    if tonumber(f[3]) >= tonumber(f[4]) then
      dead = dead + 1
      redis.call('HSET', job, 'state', 'dead_letter', 'error',
        'the lease expired on the last of ' .. f[4] .. ' attempts')
      redis.call('ZADD', KEYS[4], tonumber(f[5]), id)
    else
      redis.call('HSET', job, 'state', 'queued')
      redis.call('ZADD', KEYS[1], ready_score(job), id)
    end
  end
end
while true do
  local head = redis.call('ZPOPMIN', KEYS[1])
  if #head == 0 then
    return {recovered, dead}
  end
  local id = head[1]
  local job = prefix .. id
  if redis.call('HGET', job, 'state') == 'queued' then
    redis.call('HINCRBY', job, 'attempts', 1)
    local token = redis.call('HINCRBY', job, 'lease', 1)
    local lease_until = now + tonumber(ARGV[3])
    redis.call('HSET', job, 'state', 'running', 'lease_until', lease_until, 'worker', ARGV[2])
    redis.call('ZADD', KEYS[3], lease_until, id)
    return {recovered, dead, id, token, redis.call('HGETALL', job)}
  end
end
