-- KEYS: document, its owner's index, document counter, the kind's version, the kind's change log
-- ARGV: id, body, change log length
-- A record: the document and its index never expire; the kind's version grows by one in
-- the same script, so a reader that sees the new version also sees the document.
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), ARGV[1])
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('PERSIST', KEYS[2])
local version = redis.call('INCR', KEYS[4])
-- The change log: one entry per version, `<version>:<id>`, the newest ARGV[3] kept.
redis.call('ZADD', KEYS[5], version, version .. ':' .. ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[5], 0, -(tonumber(ARGV[3]) + 1))
return version
