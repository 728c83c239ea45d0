-- release: gives back a reservation that will never become an order. Idempotent: only the first
-- call for an order id finds it in flight and changes anything.
-- KEYS[1] {item:N}:stock, KEYS[2] {item:N}:buyers, KEYS[3] {item:N}:inflight
-- ARGV[1] order id, ARGV[2] "1" to put the unit back in stock, "0" when Postgres has no room for it,
-- ARGV[3] "force" when the writer itself releases an order it claimed and Postgres refused,
-- ARGV[4] "keepbuyer" when the shopper still holds another live order of the item
-- Returns 1 if released now, 0 if it was not in flight, 2 if the writer has claimed it (the
-- order is durably queued and will be written: it must not be released).
local v = redis.call('HGET', KEYS[3], ARGV[1])
if not v then
  return 0
end
if string.sub(v, -2) == ':c' and ARGV[3] ~= 'force' then
  return 2
end
redis.call('HDEL', KEYS[3], ARGV[1])
if ARGV[4] ~= 'keepbuyer' then
  redis.call('SREM', KEYS[2], string.match(v, '^([^:]+)'))
end
if ARGV[2] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('INCR', KEYS[1])
end
return 1
