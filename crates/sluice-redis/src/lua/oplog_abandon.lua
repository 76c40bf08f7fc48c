-- KEYS[1]: the operation's hash. ARGV[1]: fingerprint.
-- Only the in-flight record of this request is removed: a finished one (or another
-- request's, after a lease ran out) stays.
local f = redis.call('HMGET', KEYS[1], 'state', 'fp')
if f[1] == 'in_flight' and f[2] == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
