#!lua flags=no-writes
-- held: a shopper's reservations of one sale (one shard) that are still in flight, for "my
-- orders" (QUEUED orders, acknowledged and not yet written). It only reads: flagged no-writes, so
-- Redis runs it while it refuses writes (out of memory, a failed persistence, a replica).
-- KEYS[1] {sale:S}:buyers, KEYS[2] {sale:S}:inflight (the shard's)
-- ARGV the members the shopper holds a unit under (the user id under the per-sale limit,
-- "item:user" per item)
-- Returns id, entry, id, entry, … of the order ids held that are still in the in-flight hash.
local out = {}
for i = 1, #ARGV do
  local id = redis.call('HGET', KEYS[1], ARGV[i])
  if id then
    local v = redis.call('HGET', KEYS[2], id)
    if v then
      out[#out + 1] = id
      out[#out + 1] = v
    end
  end
end
return out
