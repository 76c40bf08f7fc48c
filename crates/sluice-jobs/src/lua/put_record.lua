-- KEYS: document, its owner's index, document counter, the kind's version
-- ARGV: id, body
-- A record: the document and its index never expire; the kind's version grows by one in
-- the same script, so a reader that sees the new version also sees the document.
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), ARGV[1])
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('PERSIST', KEYS[2])
return redis.call('INCR', KEYS[4])
