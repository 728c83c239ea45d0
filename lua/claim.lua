-- claim: the writer claims a batch's reservations of one sale before writing them to Postgres.
-- A claimed reservation can no longer be released as unsold (release.lua answers 2), so a publish
-- whose outcome was unknown and the writer cannot both act on the same order: exactly one wins.
-- KEYS[1] {sale:S}:meta, KEYS[2] {sale:S}:inflight, KEYS[3] {sale:S}:gone
-- ARGV pairs: order id, its reservation seq
-- Returns a list, per order: 1 claimed (in flight), 0 its unit went back (a tombstone in gone:
-- do not write it), 2 Redis does not know it (write it; Postgres constraints decide).
-- An order whose seq is above the sale's counter proves Redis lost writes: the sale is marked
-- lost (purchases fail closed until it is rebuilt from Postgres).
local m = redis.call('HMGET', KEYS[1], 'seq', 'lost')
local counter = tonumber(m[1] or '-1')
local out = {}
local lost = false
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  local r = 2
  local v = redis.call('HGET', KEYS[2], id)
  if v then
    if string.sub(v, -2) ~= ':c' then
      redis.call('HSET', KEYS[2], id, v .. ':c')
    end
    r = 1
  elseif redis.call('SISMEMBER', KEYS[3], id) == 1 then
    r = 0
  end
  if counter >= 0 and tonumber(ARGV[i + 1]) > counter then
    lost = true
  end
  out[#out + 1] = r
end
if lost and m[2] ~= '1' then
  redis.call('HSET', KEYS[1], 'lost', '1')
end
return out
