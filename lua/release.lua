-- release: gives a unit back to a sale's stock, at most once per order (idempotent).
-- KEYS[1] {sale:S}:meta, KEYS[2] {sale:S}:stock:I, KEYS[3] {sale:S}:buyers,
-- KEYS[4] {sale:S}:inflight, KEYS[5] {sale:S}:gone
-- ARGV[1] order id, ARGV[2] the operation, ARGV[3] item id, ARGV[4] user id, ARGV[5] (duplicate
-- only) the live order the shopper holds:
--   unsold     a reservation that never became an order (publish failed, orphan, unknown reserve
--              outcome); refused once the writer has claimed it
--   refused    the writer's release of an order Postgres refused (unit back, shopper freed)
--   noroom     Postgres had no unit for it: Redis promised one that does not exist (no unit back)
--   duplicate  the shopper already holds a live order: unit back, the shopper stays a buyer
--   returned   an order Postgres expired or cancelled: unit back, shopper freed
-- Every operation but noroom leaves a tombstone in gone, so a late message of the order is
-- not written and the unit is never returned twice.
-- Returns 1 done now, 0 nothing to do (not in flight, or already returned), 2 claimed by the
-- writer (unsold only: the order is durably queued and will be written), 3 (returned only) the
-- sale is not loaded or marked lost, or its fair start's draw is not applied here yet: nothing
-- done, retry once it is rebuilt or applied.
local op = ARGV[2]
local user = ARGV[4]
if op ~= 'returned' then
  local v = redis.call('HGET', KEYS[4], ARGV[1])
  if not v then
    return 0
  end
  if op == 'unsold' and string.sub(v, -2) == ':c' then
    return 2
  end
  user = string.match(v, '^[^:]+:([^:]+)')
  redis.call('HDEL', KEYS[4], ARGV[1])
elseif redis.call('SISMEMBER', KEYS[5], ARGV[1]) == 1 then
  return 0
else
  local mm = redis.call('HMGET', KEYS[1], 'limit', 'lost', 'fair', 'drawn')
  if not mm[1] or mm[2] == '1' then
    return 3 -- not held healthy: the rebuild from Postgres counts this unit; retry after it
  end
  if mm[3] and mm[3] ~= '0' and mm[4] ~= '1' then
    return 3 -- a draw's winner whose shard has not applied the draw yet (it sets the stock): retry after it
  end
end
local limit = redis.call('HGET', KEYS[1], 'limit')
if not limit then
  return 1 -- not loaded: the rebuild from Postgres will count this order right
end
local member = user
if limit == 'per-item' then
  member = ARGV[3] .. ':' .. user
end
if op == 'duplicate' then
  -- the shopper stays a buyer: of the live order they hold (ARGV[5]), which a 409 then names
  if ARGV[5] and ARGV[5] ~= '' then
    redis.call('HSET', KEYS[3], member, ARGV[5])
  end
elseif redis.call('HGET', KEYS[3], member) == ARGV[1] then
  redis.call('HDEL', KEYS[3], member)
end
if op ~= 'noroom' then
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('INCR', KEYS[2])
  end
  redis.call('SADD', KEYS[5], ARGV[1])
  redis.call('PEXPIRE', KEYS[5], 2592000000)
end
return 1
