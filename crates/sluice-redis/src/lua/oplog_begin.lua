-- KEYS[1]: the operation's hash. ARGV[1]: fingerprint; ARGV[2]: in-flight lease (ms).
-- A new operation is recorded in flight, expiring with its lease (an instance that dies
-- with it does not hold the key longer); a live one is returned as it is.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'state', 'in_flight', 'fp', ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {}
end
return redis.call('HMGET', KEYS[1], 'state', 'fp', 'status', 'ctype', 'body')
