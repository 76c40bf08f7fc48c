-- KEYS: document, its owner's index (ZSET id by first-write number), document counter
-- ARGV: id, body, retention ms
-- The document and the index live `retention` ms after this write; a document keeps its
-- first-write number (its place in the listing).
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), ARGV[1])
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]))
return 1
