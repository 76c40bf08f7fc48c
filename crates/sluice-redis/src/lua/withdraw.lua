-- withdraw: a request went before it was admitted (its client hung up); the claims it holds
-- (batch.lua `record_claims`, bucket.rs `Claim`) on the listed scopes are dropped, so the
-- smaller costs they hold back pass at once. Claims of others are left alone.
-- KEYS[1] the group's state hash
-- ARGV[1] the claimer (never 0), then per scope: its field, its layout and its bucket count
-- Returns how many claims were withdrawn.
local by = tonumber(ARGV[1])
local withdrawn, i = 0, 2
while ARGV[i] do
  local f, layout, nl = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local raw = call('HGET', KEYS[1], f)
  if raw then
    local s = unpack_mp(raw)
    -- A state of another layout keeps no claim of these limits (batch.lua drops it).
    if s[4] == layout and (s[5 + nl] or 0) > 0 and s[9 + nl] == by then
      s[5 + nl], s[6 + nl], s[7 + nl], s[8 + nl], s[9 + nl] = 0, 0, 0, 0, 0
      call('HSET', KEYS[1], f, pack(s))
      withdrawn = withdrawn + 1
    end
  end
  i = i + 3
end
return withdrawn
