-- reserve: the whole check-and-reserve of one purchase, atomically.
-- KEYS[1] {item:N}:stock     remaining units (missing = not warmed or Redis data lost: fail closed)
-- KEYS[2] {item:N}:buyers    set of user ids holding a unit
-- KEYS[3] {item:N}:inflight  hash order id -> "userId:reservedAtMillis" (reserved, not yet in Postgres)
-- KEYS[4] {item:N}:tok:NONCE marker of a used purchase token
-- ARGV[1] user id, ARGV[2] order id, ARGV[3] token lifetime in ms, ARGV[4] now in ms
-- Returns the units left (>= 0) or a negative refusal code:
--   -1 sold out, -2 already a buyer, -3 stock unknown (fail closed), -4 token already used.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -3
end
if not redis.call('SET', KEYS[4], '1', 'NX', 'PX', ARGV[3]) then
  return -4
end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return -2
end
local left = tonumber(redis.call('GET', KEYS[1]))
if left <= 0 then
  return -1
end
left = redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[1] .. ':' .. ARGV[4])
return left
