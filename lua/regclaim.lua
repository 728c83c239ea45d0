-- regclaim: the first claim of the embedded NATS registration (regrenew.lua for the first time),
-- which also takes over a registration this instance's previous run left behind.
-- KEYS[1] flashsale:embedded-nats (global, not per sale)
-- ARGV[1] owner (the instance: host, pid, address), ARGV[2] the lease in ms, ARGV[3] the site
-- (host and data folder, a prefix of owner; '' for none): a registration whose value starts
-- with the same site is this instance's previous run, killed before it could drop it; it is
-- taken over at once instead of after its lease.
-- Returns 1 when owner holds it after, 0 when another instance does.
local v = redis.call('GET', KEYS[1])
if not v or v == ARGV[1] or (ARGV[3] ~= '' and string.sub(v, 1, #ARGV[3]) == ARGV[3]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
