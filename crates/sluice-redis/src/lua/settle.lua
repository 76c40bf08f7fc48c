-- settle: replaces a reservation by what was used. Idempotent: an unknown reservation
-- (settled before, or expired) changes nothing and returns 0.
-- KEYS[1] leases zset, KEYS[2] the group's state hash
-- ARGV[1] the reservation's lease member, ARGV[2] the settlement (record.rs
-- `settle_spec`), from ARGV[3] the fields of the scopes it touches.
if call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
settle_scopes(KEYS[2], {unpack(ARGV, 3)}, unpack_mp(ARGV[2]), now_us())
return 1
