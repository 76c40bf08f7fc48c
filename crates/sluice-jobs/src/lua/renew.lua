-- KEYS: job, leases   ARGV: id, token, visibility ms
if not held(KEYS[1], ARGV[2]) then
  return 0
end
local lease_until = now_ms() + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'lease_until', lease_until)
redis.call('ZADD', KEYS[2], lease_until, ARGV[1])
return 1
