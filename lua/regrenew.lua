-- regrenew: renews the embedded NATS registration held by owner, or takes it if free (a lapsed
-- registration nobody took meanwhile).
-- KEYS[1] flashsale:embedded-nats (global, not per sale)
-- ARGV[1] owner, ARGV[2] the lease in ms
-- Returns 1 when owner holds it after, 0 when another instance does.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
