-- transfer: moves units of one item between two shards of a sharded sale (a shard that ran dry
-- borrows from the others), in three steps, none of which strands a unit. Each step touches one
-- shard's keys only (its own Redis Cluster slot):
--   out   on the donor: takes up to n units, records the transfer in the donor's log and counts
--         it in the donor's meta (xfers), so a reader of every shard can tell none moved meanwhile;
--         it bumps the donor's seq and writes the new value in the record (what the receiver
--         records of the donor: see "seqs" below). Once per transfer id: the id and its outcome
--         are kept in the donor's xferout hash (30 days), so a resent out (go-redis resends a
--         script whose reply it lost), even after done, takes nothing more and answers the same.
--         KEYS[1] {sale:S:d}:meta, KEYS[2] {sale:S:d}:stock:I, KEYS[3] {sale:S:d}:xfer,
--         KEYS[4] {sale:S:d}:xferout
--         ARGV[1] 'out', ARGV[2] transfer id, ARGV[3] receiving shard, ARGV[4] item, ARGV[5] n
--         Returns {units taken (0: none left, the shard is not held healthy, or it has not
--         applied its fair start's draw yet: drawapply.lua sets the stock), epoch, the
--         donor's seq after it (0 when nothing was taken), the receiver's seq the donor last
--         recorded (rseq:<to>, 0: none)}
--   in    on the receiver: adds the units once (the transfer id becomes a tombstone there),
--         records the donor's seq it carries (xseq:<from> in the receiver's meta, the highest
--         seen) and bumps the receiver's seq. A receiver whose seq is below what the donor
--         recorded of it (ARGV[7]) lost writes (a failover): it is marked lost, answers -3.
--         KEYS[1] {sale:S:r}:meta, KEYS[2] {sale:S:r}:stock:I, KEYS[3] {sale:S:r}:xferin
--         ARGV[1] 'in', ARGV[2] transfer id, ARGV[3] n, ARGV[4] the epoch the units left at,
--         ARGV[5] donor shard, ARGV[6] the donor's seq in the record (0: none),
--         ARGV[7] the receiver's seq the donor recorded (0: unknown)
--         Returns {1 added now, 0 added before, -1 the shard is not held healthy (keep the
--         record: the rebuild drops it), -2 the sale was rebuilt since (the snapshot counted
--         the units), -3 the shard's seq is behind (marked lost now; the record is kept); the
--         receiver's seq after it (0 with -1, -2, -3)}
--   done  on the donor: deletes the record once the receiver answered 1, 0 or -2, and records
--         the receiver's seq it answered (rseq:<to> in the donor's meta, the highest seen)
--         KEYS[1] {sale:S:d}:xfer, KEYS[2] {sale:S:d}:meta
--         ARGV[1] 'done', ARGV[2] transfer id, ARGV[3] receiving shard, ARGV[4] its seq (0: none)
-- A record in a donor's log whose receiver has not taken it is a unit in transit: the keeper
-- completes it (a process killed between out and in), and the reconciliation counts it.
-- The record: "to:item:n:epoch:millis:seq".
-- Seqs: on a Redis Cluster a shard's master can fail before its replica has a step (replication
-- is asynchronous). A donor that lost out has the units back while the receiver added them; a
-- receiver that lost in has lost them while the donor deleted the record. Either way the shard's
-- seq is now below what the other shard recorded of it (xseq:<d> on the receiver, rseq:<r> on the
-- donor): the keeper compares (store.TransferSeqLoss) and fails the sale closed.
local op = ARGV[1]
local function recordMax(key, field, v)
  if tonumber(v) > tonumber(redis.call('HGET', key, field) or '0') then
    redis.call('HSET', key, field, v)
  end
end
if op == 'out' then
  local prev = redis.call('HGET', KEYS[4], ARGV[2])
  if prev then
    local n, e, s = string.match(prev, '^(%d+):(%d+):(%d+)$')
    local r = redis.call('HGET', KEYS[1], 'rseq:' .. ARGV[3]) or '0'
    return {tonumber(n), tonumber(e), tonumber(s), tonumber(r)}
  end
  local m = redis.call('HMGET', KEYS[1], 'epoch', 'lost', 'rseq:' .. ARGV[3], 'fair', 'drawn')
  if not m[1] or m[2] == '1' then
    return {0, 0, 0, 0}
  end
  if m[4] and m[4] ~= '0' and m[5] ~= '1' then
    return {0, tonumber(m[1]), 0, 0} -- its fair start's draw is not applied here yet (the apply sets its stock)
  end
  local left = tonumber(redis.call('GET', KEYS[2]) or '0')
  local n = math.min(left, tonumber(ARGV[5]))
  if n <= 0 then
    return {0, tonumber(m[1]), 0, 0}
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('DECRBY', KEYS[2], n)
  redis.call('HINCRBY', KEYS[1], 'xfers', 1) -- how many transfers ever left this shard
  local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[3] .. ':' .. ARGV[4] .. ':' .. n .. ':' .. m[1] .. ':' .. now .. ':' .. seq)
  redis.call('HSET', KEYS[4], ARGV[2], n .. ':' .. m[1] .. ':' .. seq)
  redis.call('PEXPIRE', KEYS[4], 2592000000)
  return {n, tonumber(m[1]), seq, tonumber(m[3] or '0')}
elseif op == 'in' then
  if redis.call('SISMEMBER', KEYS[3], ARGV[2]) == 1 then
    -- added before: the receiver's seq now is at least the one it answered then
    return {0, tonumber(redis.call('HGET', KEYS[1], 'seq') or '0')}
  end
  local m = redis.call('HMGET', KEYS[1], 'epoch', 'lost', 'seq')
  if not m[1] or m[2] == '1' then
    return {-1, 0}
  end
  if m[1] ~= ARGV[4] then
    return {-2, 0}
  end
  if tonumber(m[3] or '0') < tonumber(ARGV[7] or '0') then
    -- this shard's seq is below what the donor saw of it: it lost writes (fail closed)
    redis.call('HSET', KEYS[1], 'lost', '1')
    return {-3, 0}
  end
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return {-1, 0}
  end
  redis.call('INCRBY', KEYS[2], ARGV[3])
  redis.call('SADD', KEYS[3], ARGV[2])
  redis.call('PEXPIRE', KEYS[3], 2592000000)
  if tonumber(ARGV[6] or '0') > 0 then
    recordMax(KEYS[1], 'xseq:' .. ARGV[5], ARGV[6])
  end
  return {1, redis.call('HINCRBY', KEYS[1], 'seq', 1)}
elseif op == 'done' then
  if tonumber(ARGV[4] or '0') > 0 and redis.call('EXISTS', KEYS[2]) == 1 then
    recordMax(KEYS[2], 'rseq:' .. ARGV[3], ARGV[4])
  end
  return redis.call('HDEL', KEYS[1], ARGV[2])
end
return redis.error_reply('transfer: unknown op')
