-- lease: takes (or renews) the reconciliation lease for owner, with a fencing token that grows
-- with every new holder (marklost.lua refuses a holder older than the last one that acted).
-- KEYS[1] {reconcile}:flashsale:lease (value "owner|fence"), KEYS[2] {reconcile}:flashsale:fence
-- (the last token given); global keys, not per sale, sharing the tag {reconcile}
-- ARGV[1] owner, ARGV[2] the lease in ms
-- Returns the holder's fence (owner holds it after), or 0 when another instance holds it.
local v = redis.call('GET', KEYS[1])
if v then
  local owner, fence = string.match(v, '^(.*)|(%d+)$')
  if owner == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(fence)
  end
  return 0
end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. fence, 'PX', ARGV[2])
return fence
