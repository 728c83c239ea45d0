-- marklost: fails a sale closed until it is rebuilt from Postgres (load.lua), because Redis lost
-- data or the reconciliation found a mismatch that persisted.
-- KEYS[1] {sale:S}:meta
-- ARGV[1] fencing token of the reconciliation lease ("0" when not under the lease), ARGV[2] the
-- seq the mismatch was observed at ("" for any): a sale that moved on since is left alone.
-- ARGV[3] 'check' (optional): only tell what it would do, writing nothing (a sharded sale checks
-- every shard's guard before it marks any).
-- Returns 1 marked (or, checking, would mark), 0 not loaded, -1 a newer lease holder acted
-- already, -2 the sale moved on.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local check = ARGV[3] == 'check'
if ARGV[1] ~= '0' then
  local f = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
  if f > tonumber(ARGV[1]) then
    return -1
  end
  if not check then
    redis.call('HSET', KEYS[1], 'fence', ARGV[1])
  end
end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'seq') ~= ARGV[2] then
  return -2
end
if not check then
  redis.call('HSET', KEYS[1], 'lost', '1')
end
return 1
