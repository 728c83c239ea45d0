-- drawapply: applies a fair start's decided draw (Postgres decided it) to one shard, once.
-- KEYS[1] {sale:S}:meta, KEYS[2] {sale:S}:buyers, KEYS[3] {sale:S}:entrants, KEYS[4] {sale:S}:draw,
-- KEYS[5..] {sale:S}:stock:I of each item
-- ARGV: one units-left value per item (same order as KEYS[5..]: this shard's part of what the
-- draw left), then pairs (shopper as in buyers, order id) of this shard's winners.
-- Nothing was sold in the sale before its draw is applied (a purchase after the window waits for
-- it: reserve.lua -13), so the stock is set, not moved: applying twice, or after another
-- instance did, changes nothing.
-- Returns 1 applied now, 0 applied before, 3 the shard is not loaded or marked lost (its load
-- reads the decided draw from Postgres).
local m = redis.call('HMGET', KEYS[1], 'seq', 'lost', 'drawn')
if not m[1] or m[2] == '1' then
  return 3
end
if m[3] == '1' then
  return 0
end
local nitems = #KEYS - 4
for i = 1, nitems do
  redis.call('SET', KEYS[4 + i], ARGV[i])
end
for i = nitems + 1, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('DEL', KEYS[3], KEYS[4])
redis.call('HSET', KEYS[1], 'drawn', '1')
redis.call('HDEL', KEYS[1], 'entrylost')
return 1
