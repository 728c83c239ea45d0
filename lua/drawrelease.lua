-- drawrelease: takes back a draw entry whose publish failed (the shopper was answered 503), so
-- the draw does not wait for it. A message of it that did reach the queue is still written and
-- decided like any entry.
-- KEYS[1] {sale:S}:entrants, KEYS[2] {sale:S}:draw; ARGV[1] order id, ARGV[2] the shopper (as in buyers)
-- Returns 1 taken back, 0 not held (decided, or taken back before).
if redis.call('HDEL', KEYS[2], ARGV[1]) == 0 then
  return 0
end
if redis.call('HGET', KEYS[1], ARGV[2]) == ARGV[1] then
  redis.call('HDEL', KEYS[1], ARGV[2])
end
return 1
