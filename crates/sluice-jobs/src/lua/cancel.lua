-- KEYS: job, ready, delayed   ARGV: id, retention ms, error
-- A queued or delayed job becomes failed (ARGV[3]); returns the state afterwards, '' when unknown.
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  return ''
end
if state == 'queued' then
  redis.call('ZREM', KEYS[2], ARGV[1])
elseif state == 'delayed' then
  redis.call('ZREM', KEYS[3], ARGV[1])
else
  return state
end
redis.call('HSET', KEYS[1], 'state', 'failed', 'error', ARGV[3])
retire(KEYS[1], tonumber(ARGV[2]))
return 'failed'
