-- load: warms an item from Postgres when Redis does not know it (a new sale, or data lost).
-- Does nothing if the stock key exists, so N instances may run it at once.
-- KEYS[1] {item:N}:stock, KEYS[2] {item:N}:buyers, KEYS[3] {item:N}:inflight
-- ARGV[1] units left, ARGV[2..] user ids holding a live order
-- Returns 1 if loaded now, 0 if already there.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('DEL', KEYS[2], KEYS[3])
for i = 2, #ARGV, 5000 do
  redis.call('SADD', KEYS[2], unpack(ARGV, i, math.min(i + 4999, #ARGV)))
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
