-- KEYS: document, its owner's index, document counter, the kind's version, the kind's change log
-- ARGV: id, body, '1' when a document is expected (else '0': none may exist), its body,
-- change log length
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
local version = redis.call('INCR', KEYS[4])
-- The change log: one entry per version, `<version>:<id>`, the newest ARGV[5] kept.
redis.call('ZADD', KEYS[5], version, version .. ':' .. ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[5], 0, -(tonumber(ARGV[5]) + 1))
return version
