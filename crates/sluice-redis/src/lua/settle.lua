-- settle: replaces a reservation by what was used. Idempotent: an unknown id (settled
-- before, or expired) changes nothing and returns 0.
-- KEYS[1] leases zset, KEYS[2] record
-- ARGV[1] id, ARGV[2..4] used {requests, input, output}, ARGV[5..7] upstream {...}
local raw = redis.call('GET', KEYS[2])
if not raw then
  return 0
end
local now = now_us()
local rec = cjson.decode(raw)
local used = {tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])}
local upstream = {tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])}
settle_record(rec, now, used, upstream)
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
