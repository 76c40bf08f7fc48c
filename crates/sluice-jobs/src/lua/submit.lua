-- KEYS: ready, seq, job, idempotency key (only read when ARGV[1] == '1')
-- ARGV: has_idem, id, job prefix, priority, field, value, ...
-- Returns {created (1|0), id, HGETALL of the job}.
if ARGV[1] == '1' then
  local existing = redis.call('GET', KEYS[4])
  if existing then
    local fields = redis.call('HGETALL', ARGV[3] .. existing)
    if #fields > 0 then
      return {0, existing, fields}
    end
  end
end
local seq = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[3], 'seq', seq, 'state', 'queued', 'attempts', 0, 'lease', 0, 'not_before', 0,
  'lease_until', 0, 'reruns', 0, 'worker', '', unpack(ARGV, 5))
redis.call('ZADD', KEYS[1], tonumber(ARGV[4]) * SLOT + seq, ARGV[2])
if ARGV[1] == '1' then
  redis.call('SET', KEYS[4], ARGV[2])
  redis.call('HSET', KEYS[3], 'idem_key', KEYS[4])
end
return {1, ARGV[2], redis.call('HGETALL', KEYS[3])}
