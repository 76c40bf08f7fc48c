-- KEYS: document, its owner's index, document counter, the kind's version
-- ARGV: id, body, '1' when a document is expected (else '0': none may exist), its body
-- put_record.lua, only when the document is the one expected: a writer that read it
-- before another writer's change loses (-1) instead of undoing that change.
local current = redis.call('GET', KEYS[1])
if ARGV[3] == '1' then
  if current ~= ARGV[4] then return -1 end
elseif current then
  return -1
end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), ARGV[1])
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('PERSIST', KEYS[2])
return redis.call('INCR', KEYS[4])
