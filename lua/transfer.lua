-- transfer: moves units of one item between two shards of a sharded sale (a shard that ran dry
-- borrows from the others), in three steps, none of which strands a unit. Each step touches one
-- shard's keys only (its own Redis Cluster slot):
--   out   on the donor: takes up to n units, records the transfer in the donor's log and counts
--         it in the donor's meta (xfers), so a reader of every shard can tell none moved meanwhile
--         KEYS[1] {sale:S:d}:meta, KEYS[2] {sale:S:d}:stock:I, KEYS[3] {sale:S:d}:xfer
--         ARGV[1] 'out', ARGV[2] transfer id, ARGV[3] receiving shard, ARGV[4] item, ARGV[5] n
--         Returns {units taken (0: none left, or the shard is not held healthy), epoch}
--   in    on the receiver: adds the units once (the transfer id becomes a tombstone there)
--         KEYS[1] {sale:S:r}:meta, KEYS[2] {sale:S:r}:stock:I, KEYS[3] {sale:S:r}:xferin
--         ARGV[1] 'in', ARGV[2] transfer id, ARGV[3] n, ARGV[4] the epoch the units left at
--         Returns 1 added now, 0 added before, -1 the shard is not held healthy (keep the record:
--         the rebuild drops it), -2 the sale was rebuilt since (the snapshot counted the units)
--   done  on the donor: deletes the record once the receiver answered 1, 0 or -2
--         KEYS[1] {sale:S:d}:xfer, ARGV[1] 'done', ARGV[2] transfer id
-- A record in a donor's log whose receiver has not taken it is a unit in transit: the keeper
-- completes it (a process killed between out and in), and the reconciliation counts it.
-- The record: "to:item:n:epoch:millis".
local op = ARGV[1]
if op == 'out' then
  local m = redis.call('HMGET', KEYS[1], 'epoch', 'lost')
  if not m[1] or m[2] == '1' then
    return {0, 0}
  end
  local left = tonumber(redis.call('GET', KEYS[2]) or '0')
  local n = math.min(left, tonumber(ARGV[5]))
  if n <= 0 then
    return {0, tonumber(m[1])}
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('DECRBY', KEYS[2], n)
  redis.call('HINCRBY', KEYS[1], 'xfers', 1) -- how many transfers ever left this shard
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[3] .. ':' .. ARGV[4] .. ':' .. n .. ':' .. m[1] .. ':' .. now)
  return {n, tonumber(m[1])}
elseif op == 'in' then
  if redis.call('SISMEMBER', KEYS[3], ARGV[2]) == 1 then
    return 0
  end
  local m = redis.call('HMGET', KEYS[1], 'epoch', 'lost')
  if not m[1] or m[2] == '1' then
    return -1
  end
  if m[1] ~= ARGV[4] then
    return -2
  end
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return -1
  end
  redis.call('INCRBY', KEYS[2], ARGV[3])
  redis.call('SADD', KEYS[3], ARGV[2])
  redis.call('PEXPIRE', KEYS[3], 2592000000)
  return 1
elseif op == 'done' then
  return redis.call('HDEL', KEYS[1], ARGV[2])
end
return redis.error_reply('transfer: unknown op')
