-- window: a deployment's learned short window, shared by every instance. ARGV[1] is the
-- window (µs) an instance just shrank to, or 0 to only read; it is kept for ARGV[2] ms
-- unless a shorter one is kept already (an equal one renews the hold). Returns the window
-- kept (0 for none).
-- KEYS[1] the window key
local learned = tonumber(ARGV[1])
local kept = tonumber(call('GET', KEYS[1]) or '0')
if learned > 0 and (kept == 0 or learned <= kept) then
  call('SET', KEYS[1], learned, 'PX', ARGV[2])
  return learned
end
return kept
