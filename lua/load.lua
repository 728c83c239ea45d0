-- load: (re)builds a whole sale's Redis state from a Postgres snapshot: on warm-up, and after Redis
-- lost data (keys missing, or the sale marked lost). N instances may run it at once: it does
-- nothing while the sale is loaded and healthy, or when a rebuild of an equal or newer epoch ran.
-- KEYS[1] {sale:S}:meta, KEYS[2] {sale:S}:buyers, KEYS[3] {sale:S}:inflight, KEYS[4] {sale:S}:gone,
-- KEYS[5] {sale:S}:xfer, KEYS[6] {sale:S}:xferin (a sharded sale's transfers out of and into this
-- shard: dropped, the snapshot counts their units), KEYS[7] {sale:S}:entrants and KEYS[8]
-- {sale:S}:draw (a fair start's entries: dropped, see entrylost), KEYS[9..] {sale:S}:stock:I of each item
-- (one shard of a sharded sale is loaded like a sale of its own, with its part of the stock and
-- of the buyers)
-- ARGV[1] epoch (from Postgres, bumped per rebuild), ARGV[2] purchase limit, ARGV[3] starts (unix
-- ms), ARGV[4] ends (unix ms), ARGV[5] the highest reservation seq Postgres knows, ARGV[6] token
-- lifetime in ms to void tokens issued before now (0: keep them), ARGV[7] number of buyer pairs B,
-- ARGV[8] paused ('1' or '0'), ARGV[9] fair (the end of the draw window, unix ms; '0': none),
-- ARGV[10] drawn ('1': Postgres holds the draw decided),
-- then one units-left value per item (same order as KEYS[9..]), then B pairs (shopper, order id),
-- then the order ids whose unit Postgres already gave back (tombstones).
-- A reload (epoch > 1: it was loaded before) while a draw is undecided after its window opened
-- sets entrylost: the entries this shard held are gone from Redis (they are in the queue or in
-- Postgres), so whoever closes the draw waits for a drained queue instead of counting them here.
-- Returns 1 if loaded now, 0 if nothing was done.
local m = redis.call('HMGET', KEYS[1], 'epoch', 'lost', 'seq', 'fence')
local epoch = tonumber(ARGV[1])
if m[1] then
  if m[2] ~= '1' then
    return 0
  end
  if tonumber(m[1]) >= epoch then
    return 0
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- The counter jumps far past anything issued before, so no instance takes the rebuild for a loss.
local seq = math.max(tonumber(m[3] or '0'), tonumber(ARGV[5])) + 1000000000
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
local nitems = #KEYS - 8
for i = 1, nitems do
  redis.call('SET', KEYS[8 + i], ARGV[10 + i])
end
local b = tonumber(ARGV[7])
local first = 11 + nitems
-- unpack returns at most a few thousand values in Redis's Lua: chunks of 2,000 pairs
for i = first, first + 2 * b - 1, 4000 do
  redis.call('HSET', KEYS[2], unpack(ARGV, i, math.min(i + 3999, first + 2 * b - 1)))
end
local g = first + 2 * b
for i = g, #ARGV, 4000 do
  redis.call('SADD', KEYS[4], unpack(ARGV, i, math.min(i + 3999, #ARGV)))
end
if g <= #ARGV then
  redis.call('PEXPIRE', KEYS[4], 2592000000)
end
local tokfloor = 0
if tonumber(ARGV[6]) > 0 then
  tokfloor = now + tonumber(ARGV[6])
end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'seq', string.format('%d', seq), 'limit', ARGV[2],
  'starts', ARGV[3], 'ends', ARGV[4], 'loadedAt', now, 'tokfloor', tokfloor, 'fence', m[4] or '0', 'paused', ARGV[8],
  'fair', ARGV[9], 'drawn', ARGV[10])
if ARGV[9] ~= '0' and ARGV[10] ~= '1' and now >= tonumber(ARGV[3]) and epoch > 1 then
  redis.call('HSET', KEYS[1], 'entrylost', '1')
end
return 1
