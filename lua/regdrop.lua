-- regdrop: gives the embedded NATS registration up, if owner still holds it.
-- KEYS[1] flashsale:embedded-nats (global, not per sale)
-- ARGV[1] owner
-- Returns 1 dropped, 0 another instance holds it (or nobody).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
