-- KEYS: the kind's version, the kind's change log (ZSET `<version>:<id>` by version)
-- ARGV: the version the reader holds, the prefix of the kind's document keys (same hash tag)
-- Returns {version, '1', id, body, id, body, ...}: each record written after the reader's
-- version once, with its body now ('' when gone), all read at one instant; or
-- {version, '0'} when the log lacks one of those versions (trimmed, or written by an
-- instance that keeps no log), and the reader must list every record.
local version = tonumber(redis.call('GET', KEYS[1]) or '0')
local since = tonumber(ARGV[1])
if version == since then return {tostring(version), '1'} end
if version < since then return {tostring(version), '0'} end
local entries = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. since, version)
if #entries ~= version - since then return {tostring(version), '0'} end
local out = {tostring(version), '1'}
local seen = {}
for _, entry in ipairs(entries) do
  local id = string.sub(entry, string.find(entry, ':', 1, true) + 1)
  if not seen[id] then
    seen[id] = true
    out[#out + 1] = id
    out[#out + 1] = redis.call('GET', ARGV[2] .. id) or ''
  end
end
return out
