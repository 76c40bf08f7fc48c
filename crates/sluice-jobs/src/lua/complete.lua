-- KEYS: job, leases   ARGV: id, token, status, body, retention ms
if not held(KEYS[1], ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'completed', 'result_status', ARGV[3], 'result_body', ARGV[4])
redis.call('HDEL', KEYS[1], 'error')
redis.call('ZREM', KEYS[2], ARGV[1])
retire(KEYS[1], tonumber(ARGV[5]))
return 1
